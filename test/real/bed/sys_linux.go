package bed

import (
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

func prctlSubreaper() error {
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// The cgroup v1 hierarchies the kubelet's cgroupfs driver uses; each node's
// kubelet gets cgroupRoot /realbed/NAME in all of them.
func cgroupHierarchies() []string {
	var out []string
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer", "hugetlb", "systemd"} {
		if st, err := os.Stat("/sys/fs/cgroup/" + c); err == nil && st.IsDir() {
			out = append(out, "/sys/fs/cgroup/"+c)
		}
	}
	return out
}

func makeCgroupRoot(name string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, "realbed", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			// A new cpuset cgroup has no CPUs or memory nodes until given its parent's.
			for _, d := range []string{filepath.Join(h, "realbed"), dir} {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					b, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroups, deepest first (rmdir of an
// empty cgroup; one still holding a process stays, and says so by failing).
func removeCgroupRoot(name string) {
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.Walk(filepath.Join(h, "realbed", name), func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
		_ = syscall.Rmdir(filepath.Join(h, "realbed"))
	}
}
