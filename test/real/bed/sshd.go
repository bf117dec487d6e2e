package bed

// A real Debian sshd inside one node (its mount, network and UTS
// namespaces), key-only, on the node's address: what Ansible reaches a
// fleet through.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Sshd is one node's sshd; Stop ends it.
type Sshd struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// SSHKeys are the keys a fleet's sshds share: the host key every node
// presents, and the client key the controller logs in with.
type SSHKeys struct {
	Dir, HostKey, ClientKey, KnownHosts string
}

// MakeSSHKeys writes fresh ed25519 keys into dir.
func MakeSSHKeys(dir string) (SSHKeys, error) {
	k := SSHKeys{Dir: dir, HostKey: filepath.Join(dir, "ssh_host_ed25519_key"),
		ClientKey: filepath.Join(dir, "client_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts")}
	for _, key := range []string{k.HostKey, k.ClientKey} {
		if err := run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpunode-real", "-f", key); err != nil {
			return k, err
		}
	}
	return k, nil
}

// StartSshd starts sshd on the node's address, port 22, and adds the node to
// the keys' known_hosts.
func (n *Node) StartSshd(k SSHKeys) (*Sshd, error) {
	dir := filepath.Join(k.Dir, n.Spec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(k.ClientKey + ".pub")
	if err != nil {
		return nil, err
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "sshd_config")
	// sshd_config(5). StrictModes no: the keys live under /tmp, which
	// StrictModes refuses. UsePAM no: no PAM stack is set up for this.
	body := fmt.Sprintf(`ListenAddress %s
Port 22
HostKey %s
PidFile %s
AuthorizedKeysFile %s
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
`, n.Spec.IP, k.HostKey, filepath.Join(dir, "sshd.pid"), authorized)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return nil, err
	}
	// The privilege separation directory, on the node's own /run.
	if out, err := n.Command(nil, "mkdir", "-p", "-m", "0755", "/run/sshd").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkdir /run/sshd on %s: %v: %s", n.Spec.Name, err, out)
	}
	s := &Sshd{Addr: n.Spec.IP, done: make(chan struct{}), log: filepath.Join(dir, "sshd.log")}
	log, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// nsenter execs sshd itself (no --fork): the process is sshd.
	s.cmd = n.Command(nil, "/usr/sbin/sshd", "-D", "-e", "-f", config)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	hostPub, err := os.ReadFile(k.HostKey + ".pub")
	if err != nil {
		s.Stop()
		return nil, err
	}
	known, err := os.OpenFile(k.KnownHosts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		s.Stop()
		return nil, err
	}
	_, err = fmt.Fprintf(known, "%s %s", n.Spec.IP, hostPub)
	known.Close()
	if err != nil {
		s.Stop()
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			return nil, fmt.Errorf("sshd on %s exited: %s", n.Spec.Name, b)
		default:
		}
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.Spec.IP, "22"), time.Second); err == nil {
			conn.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("sshd on %s not listening after 10s", n.Spec.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends sshd and its sessions' process group.
func (s *Sshd) Stop() { stopGroup(s.cmd, s.done, 10*time.Second) }
