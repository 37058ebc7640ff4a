// The certificates of a deployment's mutual TLS, as `geops certs` writes
// them (OpenSSL 3; docs/security.md). Under the output folder:
//
//   ca.pem, ca.key                        the deployment's CA (self-signed,
//                                         CN "geops CA <topology name>")
//   sites/<site>.pem, sites/<site>.key    one per site, CN "<site>", SAN
//                                         URI:geops://site/<site>, DNS:<site>
//                                         and the site's host (IP: or DNS:);
//                                         serverAuth + clientAuth
//   workers/<site>-worker-<i>.pem, .key   one per worker i, CN
//                                         "<site>/worker-<i>", SAN
//                                         URI:geops://worker/<site>/<i>;
//                                         clientAuth
//
// The geops URIs are the identities thrift/peer_identity.h checks. Keys are
// EC P-256, unencrypted PKCS#8 PEM, created with mode 0600; certificates are
// PEM, mode 0644, SHA-256 signed, with random 128-bit serials, valid from 5
// minutes ago for the given number of days. Every file is written under a
// temporary name in its folder and renamed into place.
//
// Keys and certificates cross this API as PEM text: no OpenSSL type leaks.
// Functions only; each call is independent and safe from any thread.
#ifndef GEOPS_CERTS_CERT_AUTHORITY_H_
#define GEOPS_CERTS_CERT_AUTHORITY_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "config/topology.h"

namespace geops::certs {

// A private key and its certificate, both PEM.
struct KeyAndCert {
  std::string key_pem;   // PKCS#8, unencrypted
  std::string cert_pem;
};

// What a leaf certificate says.
struct LeafSpec {
  std::string common_name;
  std::vector<std::string> uris;       // subjectAltName URI: entries
  std::vector<std::string> dns_names;  // subjectAltName DNS: entries
  std::vector<std::string> ips;        // subjectAltName IP: entries (IPv4 or IPv6 text)
  bool server_auth = false;            // extendedKeyUsage serverAuth
  bool client_auth = true;             // extendedKeyUsage clientAuth
  int days = 365;                      // validity from now, >= 1
};

// A fresh EC P-256 key. Internal (with the OpenSSL error) on failure.
Result<std::string> MakePrivateKeyPem();

// A self-signed CA named `common_name` with a fresh key: basicConstraints
// CA:TRUE (critical), keyUsage keyCertSign + cRLSign (critical).
// InvalidArgument for days outside 1..36500; Internal (naming the step and
// the OpenSSL error) when OpenSSL fails.
Result<KeyAndCert> MakeCertificateAuthority(const std::string& common_name, int days);

// A certificate for `spec` with a fresh key, signed by `ca`: basicConstraints
// CA:FALSE, keyUsage digitalSignature, the extendedKeyUsage and SANs of
// `spec`. InvalidArgument for a bad spec (no usage, an IP that does not
// parse, days outside 1..36500) or a CA that does not parse or whose key is
// not its certificate's; Internal when OpenSSL fails.
Result<KeyAndCert> MakeLeafCertificate(const KeyAndCert& ca, const LeafSpec& spec);

// One file pair of the layout above.
struct CertFiles {
  std::string cert_path;  // .pem
  std::string key_path;   // .key
  std::string identity;   // the geops URI in the SAN; empty for the CA
};

// Where WriteDeploymentCerts puts each file of `topology` under `out_dir`:
// the CA, then each site, then each site's workers (topology order).
struct DeploymentCertLayout {
  CertFiles ca;
  std::vector<CertFiles> sites;
  std::vector<CertFiles> workers;
};
DeploymentCertLayout CertLayout(const config::Topology& topology, const std::string& out_dir);

// Makes the CA and every site and worker certificate of `topology` and
// writes them under `out_dir` (created when missing) in the layout above.
// Everything is made in memory first, so an OpenSSL failure writes nothing.
// Without `force`, AlreadyExists naming the file when any file of the layout
// is already there (ca.key first): a CA is never replaced silently. With
// `force` the files are replaced (others in the folder are left alone).
// InvalidArgument for days outside 1..36500 or a site name or host that
// cannot go into a file name or certificate; Unavailable (with errno's
// text) when a file or folder cannot be written; Internal when OpenSSL
// fails. A failure part-way leaves each file either old or new, never half
// written.
Status WriteDeploymentCerts(const config::Topology& topology, const std::string& out_dir, int days, bool force);

// The geops identity (the first "geops://" URI of the subjectAltName) of the
// PEM certificate at `pem_path`, e.g. "geops://worker/us/0". NotFound when
// the file cannot be read or the certificate carries no geops URI;
// InvalidArgument when it is not a PEM certificate.
Result<std::string> CertificateIdentity(const std::string& pem_path);

}  // namespace geops::certs

#endif  // GEOPS_CERTS_CERT_AUTHORITY_H_
