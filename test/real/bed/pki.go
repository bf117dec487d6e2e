package bed

// The cluster's certificates, made the way k3s makes its own (one CA for
// clients and servers; k3s keeps separate client and server CAs, which the
// rules under test do not depend on). The identities are the ones the
// apiserver's Node authorizer and RBAC bootstrap policy key on:
// system:node:NAME in group system:nodes (plugin/pkg/auth/authorizer/node),
// system:kube-controller-manager and system:kube-scheduler
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), and an admin in
// system:masters, as k3s's /etc/rancher/k3s/k3s.yaml is.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a CA that issues the cluster's certificates into Dir.
type PKI struct {
	Dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

// NewPKI makes a CA in dir (ca.crt, ca.key) and the service-account key pair.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gpunode-realbed-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(der)
	p := &PKI{Dir: dir, ca: ca, key: key, next: 2}
	if err := writePEM(p.Path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, _ := x509.MarshalECPrivateKey(sa)
	saPub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err := writePEM(p.Path("sa.key"), "EC PRIVATE KEY", saDER); err != nil {
		return nil, err
	}
	return p, writePEM(p.Path("sa.pub"), "PUBLIC KEY", saPub)
}

// Path is a file of the PKI's directory.
func (p *PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

// Issue writes NAME.crt and NAME.key: a client certificate for cn in orgs,
// or, with hosts, a serving certificate for those names and addresses.
func (p *PKI) Issue(name, cn string, orgs []string, hosts ...string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	p.next++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.next),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		return err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	if err := writePEM(p.Path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(p.Path(name+".key"), "EC PRIVATE KEY", keyDER)
}

// Kubeconfig is a kubeconfig for server with NAME's certificate, embedded,
// as k3s's /etc/rancher/k3s/k3s.yaml embeds its admin's.
func (p *PKI) Kubeconfig(name, server string) (string, error) {
	var data [3]string
	for i, f := range []string{"ca.crt", name + ".crt", name + ".key"} {
		b, err := os.ReadFile(p.Path(f))
		if err != nil {
			return "", err
		}
		data[i] = base64.StdEncoding.EncodeToString(b)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    client-certificate-data: %s
    client-key-data: %s
`, data[0], server, data[1], data[2]), nil
}

// KubeconfigFiles is a kubeconfig that names its files by path, as k3s's
// /var/lib/rancher/k3s/agent/kubelet.kubeconfig does.
func KubeconfigFiles(server, ca, crt, key string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: %s
    server: %s
  name: local
contexts:
- context:
    cluster: local
    namespace: default
    user: user
  name: local
current-context: local
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
`, ca, server, crt, key)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
