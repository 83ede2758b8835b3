package progress

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// The lifetimes of the operator's certificates. The CA's key lives in the operator's memory
// only, never in the cluster: each operator process makes its own CA, and the namespaces' trust
// bundles (trust.go) keep the CAs of the last few. The serving certificate is issued again well
// before it expires, with no restart of the operator nor of any job: trainers trust the CA.
const (
	caLifetime     = 365 * 24 * time.Hour
	caRenewBefore  = 30 * 24 * time.Hour
	certLifetime   = 48 * time.Hour
	certRenewAfter = 24 * time.Hour
)

// Certs holds the operator's CA and the serving certificate it issues, for the names trainers
// reach the endpoint by.
type Certs struct {
	// Names are the DNS names and IP addresses of the endpoint.
	Names []string
	Now   func() time.Time

	mu     sync.Mutex
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	cert   *tls.Certificate
	issued time.Time
}

func (c *Certs) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// CA is the PEM of the CA that signs the serving certificate now, made when there is none or
// the one there is nears its end.
func (c *Certs) CA() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.renewCA(c.now()); err != nil {
		return nil, err
	}
	return c.caPEM, nil
}

// GetCertificate is tls.Config's: the serving certificate, issued again once it is a day old.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err := c.renewCA(now); err != nil {
		return nil, err
	}
	if c.cert != nil && now.Sub(c.issued) < certRenewAfter {
		return c.cert, nil
	}
	cert, err := c.issue(now)
	if err != nil {
		return nil, err
	}
	c.cert, c.issued = cert, now
	return cert, nil
}

func (c *Certs) renewCA(now time.Time) error {
	if c.ca != nil && c.ca.NotAfter.Sub(now) > caRenewBefore {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("mlkube progress CA %s", now.UTC().Format(time.RFC3339))},
		NotBefore:             now.Add(-time.Hour), // a node's clock a little behind still takes it
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	c.ca, c.caKey, c.cert = ca, key, nil
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func (c *Certs) issue(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "mlkube progress endpoint"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range c.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

// maxBundle is how many CAs a trust bundle keeps: the operators' of the last restarts, so that
// trainers that have not seen the newest bundle yet still reach an operator of a recent one.
const maxBundle = 4

// Bundle is the trust bundle that holds ca first, then the CAs of old that have not expired,
// maxBundle at most.
func Bundle(ca, old []byte, now time.Time) []byte {
	out := bytes.Clone(ca)
	kept := 1
	for rest := old; kept < maxBundle; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !now.Before(cert.NotAfter) {
			continue
		}
		b := pem.EncodeToMemory(block)
		if bytes.Contains(out, b) {
			continue
		}
		out = append(out, b...)
		kept++
	}
	return out
}
