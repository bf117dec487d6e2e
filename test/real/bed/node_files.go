package bed

// The files k3s lays down on a node before its services start, at k3s's
// paths: the unit gpunode reads the role from, config.yaml with the node's
// name, the kubelet's identity (system:node:NAME) and kubeconfig, the
// server's admin kubeconfig, the CNI plugins and their config, and the
// CDI spec of the node's GPUs.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	agentDir  = "/var/lib/rancher/k3s/agent"
	serverTLS = "/var/lib/rancher/k3s/server/tls"
	// KubeletKubeconfig is where k3s writes the kubelet's kubeconfig.
	KubeletKubeconfig = agentDir + "/kubelet.kubeconfig"
	// AdminKubeconfig is k3s's admin kubeconfig on a server.
	AdminKubeconfig = "/etc/rancher/k3s/k3s.yaml"
	// ImagesDir is where k3s imports archives from at every start.
	ImagesDir = agentDir + "/images"
)

func writeFile(path, body string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), mode)
}

func layNodeFiles(s NodeSpec) error {
	p := &PKI{Dir: s.PKI}
	unit := fmt.Sprintf("[Unit]\nDescription=Lightweight Kubernetes (gpunode real bed)\n[Service]\nExecStart=/usr/local/bin/k3s %s\n",
		map[bool]string{true: "server", false: "agent"}[s.Server])
	if err := writeFile("/etc/systemd/system/"+s.Unit()+".service", unit, 0o644); err != nil {
		return err
	}
	if err := writeFile("/etc/rancher/k3s/config.yaml", "node-name: "+s.Name+"\n", 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, tool := range []string{"bin/k3s", "bin/systemctl", "sbin/runc"} {
		if err := copyFile(self, "/usr/local/"+tool, 0o755); err != nil {
			return err
		}
	}
	for dst, src := range map[string]string{
		agentDir + "/server-ca.crt":       "ca.crt",
		agentDir + "/client-ca.crt":       "ca.crt",
		agentDir + "/client-kubelet.crt":  "node-" + s.Name + ".crt",
		agentDir + "/client-kubelet.key":  "node-" + s.Name + ".key",
		agentDir + "/serving-kubelet.crt": "serving-" + s.Name + ".crt",
		agentDir + "/serving-kubelet.key": "serving-" + s.Name + ".key",
	} {
		if err := copyFile(p.Path(src), dst, 0o600); err != nil {
			return err
		}
	}
	kubeconfig := KubeconfigFiles(s.APIServer(), agentDir+"/server-ca.crt",
		agentDir+"/client-kubelet.crt", agentDir+"/client-kubelet.key")
	if err := writeFile(KubeletKubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	if s.Server {
		for _, f := range []string{"ca.crt", "sa.key", "sa.pub", "apiserver.crt", "apiserver.key",
			"apiserver-kubelet-client.crt", "apiserver-kubelet-client.key"} {
			if err := copyFile(p.Path(f), serverTLS+"/"+f, 0o600); err != nil {
				return err
			}
		}
		for _, who := range []string{"admin", "controller-manager", "scheduler"} {
			k, err := p.Kubeconfig(who, "https://127.0.0.1:6443")
			if err != nil {
				return err
			}
			path := "/var/lib/rancher/k3s/server/cred/" + who + ".kubeconfig"
			if who == "admin" {
				path = AdminKubeconfig
			}
			if err := writeFile(path, k, 0o600); err != nil {
				return err
			}
		}
	}
	// The sandbox image, as an air-gapped k3s gets it: an archive in the
	// images folder, imported at start.
	if err := os.MkdirAll(ImagesDir, 0o755); err != nil {
		return err
	}
	if err := PauseArchive(s.Bin, ImagesDir+"/pause.tar"); err != nil {
		return err
	}
	if err := layCNI(s); err != nil {
		return err
	}
	if err := writeFile(agentDir+"/kubelet-config.yaml", kubeletConfig(s), 0o600); err != nil {
		return err
	}
	if s.GPUs > 0 {
		return writeCDISpec(s)
	}
	return nil
}

// layCNI puts Debian's containernetworking-plugins where k3s keeps its CNI
// binaries, and a bridge network where k3s keeps its CNI config (flannel's
// place; no flannel here: the tests need no traffic between nodes' pods).
func layCNI(s NodeSpec) error {
	bin := "/var/lib/rancher/k3s/data/cni"
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		_ = os.Remove(filepath.Join(bin, p))
		if err := os.Symlink("/usr/lib/cni/"+p, filepath.Join(bin, p)); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "realbed",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.42.%d.0/24"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, s.Index)
	return writeFile(agentDir+"/etc/cni/net.d/10-realbed.conflist", conf, 0o644)
}

// GPUUUID is the UUID the NVML stand-in (test/stubs/stub_nvidia_ml.c) gives
// GPU i.
func GPUUUID(i int) string { return fmt.Sprintf("GPU-6f9abcd6-2781-31d5-1032-cc2f7821fb%02x", 0xb8+i) }

// writeCDISpec is the CDI spec `nvidia-ctk cdi generate` would write for the
// node's GPUs (kind nvidia.com/gpu, a device per index and per UUID, and
// "all"), for the nvidia runtime in CDI mode. The fake GPUs have no device
// nodes to inject: each device sets NVIDIA_GPU_UUIDS to its GPUs, the
// container's record of what it got, and every device mounts the NVML
// stand-in where the driver's library would be, with the stand-in's GPU
// count, so that the device plugin's NVML sees the node's GPUs.
func writeCDISpec(s NodeSpec) error {
	type edits struct {
		Env    []string         `json:"env,omitempty"`
		Mounts []map[string]any `json:"mounts,omitempty"`
	}
	type device struct {
		Name           string `json:"name"`
		ContainerEdits edits  `json:"containerEdits"`
	}
	var all []string
	var devices []device
	for i := 0; i < s.GPUs; i++ {
		all = append(all, GPUUUID(i))
		e := edits{Env: []string{"NVIDIA_GPU_UUIDS=" + GPUUUID(i)}}
		devices = append(devices, device{fmt.Sprint(i), e}, device{GPUUUID(i), e})
	}
	devices = append(devices, device{"all", edits{Env: []string{"NVIDIA_GPU_UUIDS=" + strings.Join(all, ",")}}})
	lib := "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
	spec := map[string]any{
		"cdiVersion": "0.6.0",
		"kind":       "nvidia.com/gpu",
		"devices":    devices,
		"containerEdits": edits{
			Env: []string{fmt.Sprintf("GPUNODE_STUB_NVML_GPUS=%d", s.GPUs)},
			Mounts: []map[string]any{{"hostPath": lib, "containerPath": lib,
				"options": []string{"ro", "nosuid", "nodev", "bind"}}},
		},
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return writeFile("/etc/cdi/nvidia.json", string(b)+"\n", 0o644)
}

// kubeletConfig is the kubelet's configuration: k3s's choices where they
// matter to the rules under test (x509 client auth from the cluster CA,
// containerd at k3s's socket), and what this machine needs: cgroup v1
// (failCgroupV1: false), no systemd (cgroupfs), swap allowed, and a cgroup
// root of the node's own, since several kubelets share the machine.
func kubeletConfig(s NodeSpec) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /realbed/%s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  x509:
    clientCAFile: %s/client-ca.crt
  webhook:
    enabled: false
  anonymous:
    enabled: false
authorization:
  mode: AlwaysAllow
tlsCertFile: %s/serving-kubelet.crt
tlsPrivateKeyFile: %s/serving-kubelet.key
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 5s
`, s.Name, s.IP, agentDir, agentDir, agentDir)
}
