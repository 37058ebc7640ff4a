#include "certs/cert_authority.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/file_io.h"

namespace geops::certs {
namespace {

namespace fs = std::filesystem;

constexpr long kBackdateSeconds = 5 * 60;  // notBefore: tolerates clocks a little behind
constexpr int kMaxDays = 36500;
constexpr size_t kMaxCommonNameChars = 64;  // RFC 5280 ub-common-name
constexpr std::string_view kGeopsUriPrefix = "geops://";

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(ASN1_INTEGER* p) const { ASN1_INTEGER_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(GENERAL_NAME* p) const { GENERAL_NAME_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Free>;
using X509Ptr = std::unique_ptr<X509, Free>;
using BioPtr = std::unique_ptr<BIO, Free>;
using BnPtr = std::unique_ptr<BIGNUM, Free>;
using Asn1IntPtr = std::unique_ptr<ASN1_INTEGER, Free>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Free>;
using GenNamePtr = std::unique_ptr<GENERAL_NAME, Free>;
using GenNamesPtr = std::unique_ptr<GENERAL_NAMES, Free>;

// Internal "<step>: <every error on OpenSSL's queue>", emptying the queue.
Status OpenSslError(const std::string& step) {
  std::string detail;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    detail += (detail.empty() ? "" : "; ") + std::string(buf);
  }
  if (detail.empty()) detail = "no OpenSSL error reported";
  return InternalError(step + ": " + detail);
}

Result<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n <= 0 || data == nullptr) return OpenSslError("reading PEM from memory");
  return std::string(data, static_cast<size_t>(n));
}

Result<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return OpenSslError("generating an EC P-256 key (EVP_PKEY_Q_keygen)");
  return key;
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  // PKCS#8 ("BEGIN PRIVATE KEY"), no cipher.
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("encoding the private key as PEM (PEM_write_bio_PrivateKey)");
  }
  return BioText(bio.get());
}

Result<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError("encoding the certificate as PEM (PEM_write_bio_X509)");
  }
  return BioText(bio.get());
}

// At most kMaxCommonNameChars UTF-8 characters of `name`.
std::string CommonName(const std::string& name) {
  size_t chars = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool starts_char = (static_cast<unsigned char>(name[i]) & 0xC0) != 0x80;
    if (starts_char && ++chars > kMaxCommonNameChars) return name.substr(0, i);
  }
  return name;
}

// A new v3 certificate for `key` named `common_name`: random 128-bit serial,
// valid from kBackdateSeconds ago for `days` days. Issuer and extensions are
// the caller's.
Result<X509Ptr> NewCertificate(EVP_PKEY* key, const std::string& common_name, int days) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return OpenSslError("creating a certificate (X509_new)");
  }
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("drawing a serial number (RAND_bytes)");
  serial[sizeof(serial) - 1] |= 1;  // never zero
  BnPtr bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  Asn1IntPtr serial_int(bn ? BN_to_ASN1_INTEGER(bn.get(), nullptr) : nullptr);
  if (!serial_int || X509_set_serialNumber(cert.get(), serial_int.get()) != 1) {
    return OpenSslError("setting the serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) == nullptr) {
    return OpenSslError("setting the validity period");
  }
  const std::string cn = CommonName(common_name);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1) {
    return OpenSslError("setting the subject CN '" + cn + "'");
  }
  if (X509_set_pubkey(cert.get(), key) != 1) return OpenSslError("setting the public key");
  return cert;
}

// Adds extension `nid` with OpenSSL's configuration text `value` (a fixed
// string of this file, never user input), in the context of `issuer`.
Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(std::string("adding ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return Status::Ok();
}

Status AddIa5Name(GENERAL_NAMES* names, int type, const std::string& value) {
  GenNamePtr name(GENERAL_NAME_new());
  ASN1_IA5STRING* text = ASN1_IA5STRING_new();
  if (!name || text == nullptr || ASN1_STRING_set(text, value.data(), static_cast<int>(value.size())) != 1) {
    ASN1_IA5STRING_free(text);
    return OpenSslError("building subjectAltName entry '" + value + "'");
  }
  GENERAL_NAME_set0_value(name.get(), type, text);
  if (sk_GENERAL_NAME_push(names, name.get()) == 0) return OpenSslError("building subjectAltName");
  name.release();
  return Status::Ok();
}

bool IsIpAddress(const std::string& text) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

Status AddSubjectAltNames(X509* cert, const LeafSpec& spec) {
  GenNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return OpenSslError("building subjectAltName");
  for (const std::string& uri : spec.uris) GEOPS_RETURN_IF_ERROR(AddIa5Name(names.get(), GEN_URI, uri));
  for (const std::string& dns : spec.dns_names) GEOPS_RETURN_IF_ERROR(AddIa5Name(names.get(), GEN_DNS, dns));
  for (const std::string& ip : spec.ips) {
    ASN1_OCTET_STRING* octets = a2i_IPADDRESS(ip.c_str());
    GenNamePtr name(GENERAL_NAME_new());
    if (octets == nullptr || !name) {
      ASN1_OCTET_STRING_free(octets);
      return OpenSslError("building subjectAltName IP:" + ip);
    }
    GENERAL_NAME_set0_value(name.get(), GEN_IPADD, octets);
    if (sk_GENERAL_NAME_push(names.get(), name.get()) == 0) return OpenSslError("building subjectAltName");
    name.release();
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return OpenSslError("adding subjectAltName");
  }
  return Status::Ok();
}

Status Sign(X509* cert, EVP_PKEY* issuer_key) {
  if (X509_sign(cert, issuer_key, EVP_sha256()) <= 0) return OpenSslError("signing the certificate (SHA-256)");
  return Status::Ok();
}

Result<KeyAndCert> ToPem(EVP_PKEY* key, X509* cert) {
  KeyAndCert out;
  GEOPS_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key));
  GEOPS_ASSIGN_OR_RETURN(out.cert_pem, CertPem(cert));
  return out;
}

Status CheckDays(int days) {
  if (days < 1 || days > kMaxDays) {
    return InvalidArgumentError("validity must be 1.." + std::to_string(kMaxDays) + " days, got " +
                                std::to_string(days));
  }
  return Status::Ok();
}

// ---- files ----

// Writes `content` to `path` through a temporary file in the same folder,
// created with `mode` (and O_EXCL, so never through an existing file or
// link), synced, then renamed over `path`.
Status WriteFileAtomically(const fs::path& path, std::string_view content, mode_t mode) {
  static std::atomic<uint64_t> counter{0};
  fs::path tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    std::string name = ".";
    name += path.filename().string();
    name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    tmp = path.parent_path() / name;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) return ErrnoError("cannot create " + tmp.string());
  }
  if (Status s = WriteAllSynced(fd, content, tmp); !s.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoError("cannot rename " + tmp.string() + " to " + path.string());
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}


Status WritePair(const CertFiles& files, const KeyAndCert& pem) {
  GEOPS_RETURN_IF_ERROR(WriteFileAtomically(files.key_path, pem.key_pem, 0600));
  return WriteFileAtomically(files.cert_path, pem.cert_pem, 0644);
}

// A site name becomes a file name, a URI path segment and a DNS name.
bool IsSafeName(const std::string& name) {
  if (name.empty() || name.size() > 253 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string SiteUri(const std::string& site) { return std::string(kGeopsUriPrefix) + "site/" + site; }
std::string WorkerUri(const std::string& site, int worker) {
  return std::string(kGeopsUriPrefix) + "worker/" + site + "/" + std::to_string(worker);
}

Result<LeafSpec> SiteLeaf(const config::SiteSpec& site, int days) {
  if (!IsSafeName(site.name)) {
    return InvalidArgumentError("site name '" + site.name +
                                "' cannot name a certificate: use letters, digits, '-', '_' and '.'");
  }
  LeafSpec spec;
  spec.common_name = site.name;
  spec.uris = {SiteUri(site.name)};
  spec.dns_names = {site.name};
  if (IsIpAddress(site.host)) {
    spec.ips = {site.host};
  } else if (IsSafeName(site.host)) {
    if (site.host != site.name) spec.dns_names.push_back(site.host);
  } else {
    return InvalidArgumentError("site " + site.name + ": host '" + site.host +
                                "' is neither an IP address nor a DNS name");
  }
  spec.server_auth = true;
  spec.client_auth = true;
  spec.days = days;
  return spec;
}

LeafSpec WorkerLeaf(const std::string& site, int worker, int days) {
  LeafSpec spec;
  spec.common_name = site + "/worker-" + std::to_string(worker);
  spec.uris = {WorkerUri(site, worker)};
  spec.server_auth = false;
  spec.client_auth = true;
  spec.days = days;
  return spec;
}

}  // namespace

Result<std::string> MakePrivateKeyPem() {
  GEOPS_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  return KeyPem(key.get());
}

Result<KeyAndCert> MakeCertificateAuthority(const std::string& common_name, int days) {
  GEOPS_RETURN_IF_ERROR(CheckDays(days));
  GEOPS_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  GEOPS_ASSIGN_OR_RETURN(X509Ptr cert, NewCertificate(key.get(), common_name, days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return OpenSslError("setting the CA's issuer name");
  }
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  GEOPS_RETURN_IF_ERROR(Sign(cert.get(), key.get()));
  return ToPem(key.get(), cert.get());
}

Result<KeyAndCert> MakeLeafCertificate(const KeyAndCert& ca, const LeafSpec& spec) {
  GEOPS_RETURN_IF_ERROR(CheckDays(spec.days));
  if (!spec.server_auth && !spec.client_auth) {
    return InvalidArgumentError("certificate '" + spec.common_name + "' needs serverAuth or clientAuth");
  }
  for (const std::string& ip : spec.ips) {
    if (!IsIpAddress(ip)) return InvalidArgumentError("'" + ip + "' is not an IP address");
  }
  BioPtr key_bio(BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size())));
  PkeyPtr ca_key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  BioPtr cert_bio(BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size())));
  X509Ptr ca_cert(cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!ca_key || !ca_cert) {
    Status s = OpenSslError("reading the CA");
    return InvalidArgumentError(s.message());
  }
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    Status s = OpenSslError("the CA's key does not match its certificate");
    return InvalidArgumentError(s.message());
  }

  GEOPS_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  GEOPS_ASSIGN_OR_RETURN(X509Ptr cert, NewCertificate(key.get(), spec.common_name, spec.days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1) {
    return OpenSslError("setting the issuer name");
  }
  const char* eku = spec.server_auth && spec.client_auth ? "serverAuth,clientAuth"
                    : spec.server_auth                    ? "serverAuth"
                                                          : "clientAuth";
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, eku));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_subject_key_identifier, "hash"));
  GEOPS_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (!spec.uris.empty() || !spec.dns_names.empty() || !spec.ips.empty()) {
    GEOPS_RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), spec));
  }
  GEOPS_RETURN_IF_ERROR(Sign(cert.get(), ca_key.get()));
  return ToPem(key.get(), cert.get());
}

DeploymentCertLayout CertLayout(const config::Topology& topology, const std::string& out_dir) {
  const fs::path dir(out_dir);
  DeploymentCertLayout layout;
  layout.ca = {(dir / "ca.pem").string(), (dir / "ca.key").string(), ""};
  for (const config::SiteSpec& site : topology.sites) {
    const fs::path stem = dir / "sites" / site.name;
    layout.sites.push_back({stem.string() + ".pem", stem.string() + ".key", SiteUri(site.name)});
  }
  for (const config::SiteSpec& site : topology.sites) {
    for (int i = 0; i < site.workers; ++i) {
      const fs::path stem = dir / "workers" / (site.name + "-worker-" + std::to_string(i));
      layout.workers.push_back({stem.string() + ".pem", stem.string() + ".key", WorkerUri(site.name, i)});
    }
  }
  return layout;
}

Status WriteDeploymentCerts(const config::Topology& topology, const std::string& out_dir, int days, bool force) {
  GEOPS_RETURN_IF_ERROR(CheckDays(days));
  if (out_dir.empty()) return InvalidArgumentError("no output folder given");
  const DeploymentCertLayout layout = CertLayout(topology, out_dir);

  // Refuse before making anything: ca.key first, then every other file.
  if (!force) {
    std::vector<const std::string*> paths = {&layout.ca.key_path, &layout.ca.cert_path};
    for (const auto* group : {&layout.sites, &layout.workers}) {
      for (const CertFiles& f : *group) {
        paths.push_back(&f.key_path);
        paths.push_back(&f.cert_path);
      }
    }
    for (const std::string* path : paths) {
      std::error_code ec;
      if (fs::symlink_status(*path, ec).type() != fs::file_type::not_found) {
        return AlreadyExistsError(*path + " already exists; geops certs never replaces a certificate authority "
                                  "or key silently: pass --force to make a new CA and replace every file (the "
                                  "old certificates stop working)");
      }
    }
  }

  // Everything in memory first: an OpenSSL failure leaves no file behind.
  const std::string ca_name = "geops CA " + topology.name;
  Result<KeyAndCert> ca = MakeCertificateAuthority(ca_name, days);
  if (!ca.ok()) return ca.status().WithContext(layout.ca.cert_path);
  std::vector<KeyAndCert> sites, workers;
  for (size_t s = 0; s < topology.sites.size(); ++s) {
    const config::SiteSpec& site = topology.sites[s];
    GEOPS_ASSIGN_OR_RETURN(LeafSpec spec, SiteLeaf(site, days));
    Result<KeyAndCert> pem = MakeLeafCertificate(*ca, spec);
    if (!pem.ok()) return pem.status().WithContext(layout.sites[s].cert_path);
    sites.push_back(std::move(pem).value());
  }
  for (const config::SiteSpec& site : topology.sites) {
    for (int i = 0; i < site.workers; ++i) {
      Result<KeyAndCert> pem = MakeLeafCertificate(*ca, WorkerLeaf(site.name, i, days));
      if (!pem.ok()) return pem.status().WithContext(layout.workers[workers.size()].cert_path);
      workers.push_back(std::move(pem).value());
    }
  }

  const fs::path dir(out_dir);
  for (const fs::path& d : {dir, dir / "sites", dir / "workers"}) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) return UnavailableError("cannot create folder " + d.string() + ": " + ec.message());
  }
  GEOPS_RETURN_IF_ERROR(WritePair(layout.ca, *ca));
  for (size_t i = 0; i < sites.size(); ++i) GEOPS_RETURN_IF_ERROR(WritePair(layout.sites[i], sites[i]));
  for (size_t i = 0; i < workers.size(); ++i) GEOPS_RETURN_IF_ERROR(WritePair(layout.workers[i], workers[i]));
  for (const fs::path& d : {dir / "workers", dir / "sites", dir}) GEOPS_RETURN_IF_ERROR(SyncDirectory(d));
  return Status::Ok();
}

Result<std::string> CertificateIdentity(const std::string& pem_path) {
  std::ifstream in(pem_path, std::ios::binary);
  if (!in) return NotFoundError("cannot read certificate " + pem_path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  const std::string pem = text.str();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    Status s = OpenSslError(pem_path + " is not a PEM certificate");
    return InvalidArgumentError(s.message());
  }
  GenNamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  ERR_clear_error();
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
    const std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                            static_cast<size_t>(ASN1_STRING_length(uri)));
    if (value.compare(0, kGeopsUriPrefix.size(), kGeopsUriPrefix) == 0) return value;
  }
  return NotFoundError(pem_path + " carries no geops:// URI in its subjectAltName: not made by geops certs");
}

}  // namespace geops::certs
