package bed

// The node's own view of the machine, made in its mount namespace: the
// directories k3s, the kubelet, containerd, dpkg and gpunode write are the
// node's, and everything else is the machine's, read through an overlay so
// that a package the test installs lands on the node and not on the machine.

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func mount(src, target, fstype string, flags uintptr, data string) error {
	if err := syscall.Mount(src, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s): %w", src, target, fstype, err)
	}
	return nil
}

func bind(src, target string) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return mount(src, target, "", syscall.MS_BIND|syscall.MS_REC, "")
}

// overlay puts the node's upper layer over the machine's dir.
func overlay(nodeDir, dir string) error {
	name := filepath.Base(dir)
	if dir == "/var/lib" {
		name = "var-lib"
	}
	upper := filepath.Join(nodeDir, "upper", name)
	work := filepath.Join(nodeDir, "work", name)
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return mount("overlay", dir, "overlay", 0,
		fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dir, upper, work))
}

// makeNodeMounts runs first in the node process, in its new mount namespace.
func makeNodeMounts(s NodeSpec) error {
	// Nothing mounted here may reach the machine's namespace.
	if err := mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return err
	}
	for _, d := range []string{"/etc", "/usr", "/var/lib"} {
		if err := overlay(s.Dir, d); err != nil {
			return err
		}
	}
	// containerd's overlayfs snapshotter cannot put its layers on an
	// overlay, and the kubelet's volumes want a plain file system: these are
	// binds of the node's own directories.
	for src, target := range map[string]string{
		"rancher": "/var/lib/rancher",
		"kubelet": "/var/lib/kubelet",
		"log":     "/var/log",
	} {
		if err := bind(filepath.Join(s.Dir, src), target); err != nil {
			return err
		}
	}
	// The kubelet's mount propagation for pod volumes wants it shared.
	if err := mount("", "/var/lib/kubelet", "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return err
	}
	if err := mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	if err := makeDev(s); err != nil {
		return err
	}
	if s.GPUs > 0 {
		return makeDriverView(s)
	}
	return nil
}

// makeDev gives the node a /dev of its own, so that a GPU node's device
// nodes are the node's and not the machine's. They are plain files, as in
// test/sim/host-tree.sh: gpunode takes anything but a directory as one, and
// the CDI spec of the fake GPUs injects no device node.
func makeDev(s NodeSpec) error {
	if err := mount("tmpfs", "/dev", "tmpfs", syscall.MS_NOSUID, "mode=0755"); err != nil {
		return err
	}
	// The character devices a container runtime and the kubelet open, with
	// Linux's numbers (Documentation/admin-guide/devices.txt).
	for name, dev := range map[string][2]uint32{"null": {1, 3}, "zero": {1, 5}, "full": {1, 7},
		"random": {1, 8}, "urandom": {1, 9}, "kmsg": {1, 11}, "tty": {5, 0}} {
		if err := syscall.Mknod("/dev/"+name, syscall.S_IFCHR|0o666, int(dev[0]<<8|dev[1])); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", name, err)
		}
		if err := os.Chmod("/dev/"+name, 0o666); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := os.MkdirAll("/dev/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := mount("devpts", "/dev/pts", "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	if err := mount("shm", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777"); err != nil {
		return err
	}
	for link, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd",
		"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, "/dev/"+link); err != nil {
			return err
		}
	}
	if s.GPUs == 0 {
		return nil
	}
	nodes := []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}
	for i := 0; i < s.GPUs; i++ {
		nodes = append(nodes, fmt.Sprintf("nvidia%d", i))
	}
	for _, n := range nodes {
		if err := os.WriteFile("/dev/"+n, nil, 0o666); err != nil {
			return err
		}
	}
	return nil
}

// makeDriverView is what a loaded NVIDIA driver shows a GPU node: its
// version under /proc/driver, its modules under /sys/module, the NVML and
// CUDA libraries (the stand-ins, answering for s.GPUs GPUs), and nvidia-smi.
// The readings are the real H200's (test/fixtures/gpu/h200-580.159.04).
func makeDriverView(s NodeSpec) error {
	reading := filepath.Join(s.Fixtures, "gpu/h200-580.159.04")
	if err := mount("tmpfs", "/proc/driver", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	if err := os.MkdirAll("/proc/driver/nvidia", 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(reading, "proc-driver-nvidia-version"), "/proc/driver/nvidia/version", 0o444); err != nil {
		return err
	}
	if err := mount("tmpfs", "/sys/module", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	for _, m := range []string{"nvidia", "nvidia_uvm"} {
		if err := os.MkdirAll("/sys/module/"+m, 0o755); err != nil {
			return err
		}
	}
	lib := "/usr/lib/x86_64-linux-gnu"
	for _, l := range []string{"libnvidia-ml.so.1", "libcuda.so.1"} {
		if err := copyFile(filepath.Join(s.Stubs, l), filepath.Join(lib, l), 0o755); err != nil {
			return err
		}
	}
	// The sim's nvidia-smi finds its readings beside itself: call it there.
	smi := filepath.Join(s.Fixtures, "../sim/bin/nvidia-smi")
	return writeFile("/usr/bin/nvidia-smi", "#!/bin/sh\nexec "+smi+" \"$@\"\n", 0o755)
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".realbed-tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
