package bed

// Image archives in the OCI image layout (image-spec image-layout.md), the
// form `ctr images import` and gpunode's bundle take: one uncompressed
// layer, a config, a manifest, and index.json naming the image by
// org.opencontainers.image.ref.name. Built here from files of this machine:
// nothing is pulled.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Image is what goes into one.
type Image struct {
	Ref        string            // e.g. nvcr.io/nvidia/k8s-device-plugin:v0.19.3
	Files      map[string]string // path in the image -> file on this machine
	Entrypoint []string
	Env        []string
}

// WithLibraries adds the shared libraries a dynamically linked file needs
// (as ldd lists them), at the same paths, so that it runs in the image.
func (img *Image) WithLibraries(binary string) error {
	out, err := exec.Command("ldd", binary).Output()
	if err != nil {
		return nil // a static binary: ldd says "not a dynamic executable"
	}
	re := regexp.MustCompile(`(/[^ ]+) \(0x`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		real, err := filepath.EvalSymlinks(m[1])
		if err != nil {
			return err
		}
		img.Files[m[1]] = real
	}
	return nil
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{"sha256:" + hex.EncodeToString(sum[:]), data}
}

// WriteArchive writes img as an OCI layout tar at path.
func (img Image) WriteArchive(path string) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	paths := make([]string, 0, len(img.Files))
	for p := range img.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range append(dirList, "/tmp") {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode}); err != nil {
			return err
		}
	}
	for _, p := range paths {
		data, err := os.ReadFile(img.Files[p])
		if err != nil {
			return err
		}
		st, err := os.Stat(img.Files[p])
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"),
			Mode: int64(st.Mode().Perm()), Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBlob := newBlob(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": img.Entrypoint, "Env": append([]string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, img.Env...)},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerBlob.digest}},
	})
	configBlob := newBlob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json",
			"digest": configBlob.digest, "size": len(configBlob.data)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar",
			"digest": layerBlob.digest, "size": len(layerBlob.data)}},
	})
	manifestBlob := newBlob(manifest)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest": manifestBlob.digest, "size": len(manifestBlob.data),
			"platform":    map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{"org.opencontainers.image.ref.name": img.Ref}}},
	})
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	defer f.Close()
	out := tar.NewWriter(f)
	put := func(name string, data []byte) error {
		if err := out.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := out.Write(data)
		return err
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, b := range []blob{layerBlob, configBlob, manifestBlob} {
		if err := put("blobs/sha256/"+strings.TrimPrefix(b.digest, "sha256:"), b.data); err != nil {
			return err
		}
	}
	if err := put("index.json", index); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// PauseImage is the sandbox image, named as k3s's containerd config names it.
func PauseArchive(bin, path string) error {
	return Image{Ref: "docker.io/" + PauseImage, Files: map[string]string{"/pause": filepath.Join(bin, "pause")},
		Entrypoint: []string{"/pause"}}.WriteArchive(path)
}

// DevicePluginImage is the real device plugin v0.19.3, packaged as NVIDIA's
// image is (deployments/container/Dockerfile: the binary on PATH, and
// NVIDIA_VISIBLE_DEVICES=all with the utility capability, so that the nvidia
// runtime gives it every GPU's NVML).
const DevicePluginRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"

func DevicePluginArchive(bin, path string) error {
	plugin := filepath.Join(bin, "nvidia-device-plugin")
	img := Image{Ref: DevicePluginRef, Files: map[string]string{"/usr/bin/nvidia-device-plugin": plugin},
		Entrypoint: []string{"/usr/bin/nvidia-device-plugin"},
		Env:        []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility", "NVIDIA_DISABLE_REQUIRE=true"}}
	if err := img.WithLibraries(plugin); err != nil {
		return fmt.Errorf("device plugin's libraries: %w", err)
	}
	return img.WriteArchive(path)
}

// CUDASampleRef is the smoke stage's default image.
const CUDASampleRef = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"

// BusyboxStatic is Debian's static busybox (package busybox-static): the
// CUDA sample image's /bin/sh, as NVIDIA's image (on Ubuntu) has one. The
// proof Pods run their script in it (installer/proof/proof_pod.hpp).
const BusyboxStatic = "/bin/busybox"

// CUDASampleArchive is the stand-in for the CUDA sample (cmd/cuda-sample),
// with a shell.
func CUDASampleArchive(bin, path string) error {
	return Image{Ref: CUDASampleRef, Files: map[string]string{"/cuda-samples/vectorAdd": filepath.Join(bin, "cuda-sample"),
		"/bin/sh": BusyboxStatic},
		Entrypoint: []string{"/cuda-samples/vectorAdd"},
		// As NVIDIA's CUDA base images set them.
		Env: []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"}}.WriteArchive(path)
}
