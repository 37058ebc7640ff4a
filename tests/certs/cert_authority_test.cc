// `geops certs`: the files, their modes, what the certificates say, that they
// chain to their own CA and no other, and that a CA is never replaced
// without --force.
#include "certs/cert_authority.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/topology.h"
#include "tests/common/scratch_files.h"

namespace geops::certs {
namespace {

namespace fs = std::filesystem;
using test_files::FreshTestDir;
using test_files::ReadFile;

// Three sites: one on an IPv4 address, one on a DNS name, one on IPv6.
constexpr const char* kTopology = R"(name = "demo"
[model]
workload = "counter"
layers = [4, 4]
[security]
certs = "certs"
[[sites]]
name = "us"
host = "10.1.2.3"
workers = 2
[[sites]]
name = "eu"
host = "localhost"
workers = 1
[[sites]]
name = "ap"
host = "::1"
workers = 1
)";

config::Topology Demo() {
  Result<config::Topology> t = config::ParseTopology(kTopology, "demo.toml");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : config::Topology{};
}

struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, X509Deleter>;

X509Ptr LoadCert(const std::string& path) {
  const std::string pem = ReadFile(path);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  EXPECT_TRUE(cert) << path;
  return cert;
}

KeyPtr LoadKey(const std::string& path) {
  const std::string pem = ReadFile(path);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  KeyPtr key(PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  EXPECT_TRUE(key) << path;
  return key;
}

// X509_verify_cert of `leaf_path` against the single CA `ca_path`, for a TLS
// server or client certificate (checks extendedKeyUsage too).
bool Verifies(const std::string& ca_path, const std::string& leaf_path, int purpose) {
  X509Ptr ca = LoadCert(ca_path);
  X509Ptr leaf = LoadCert(leaf_path);
  if (!ca || !leaf) return false;
  std::unique_ptr<X509_STORE, X509Deleter> store(X509_STORE_new());
  EXPECT_EQ(X509_STORE_add_cert(store.get(), ca.get()), 1);
  std::unique_ptr<X509_STORE_CTX, X509Deleter> ctx(X509_STORE_CTX_new());
  EXPECT_EQ(X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr), 1);
  EXPECT_EQ(X509_STORE_CTX_set_purpose(ctx.get(), purpose), 1);
  return X509_verify_cert(ctx.get()) == 1;
}

int Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<int>(st.st_mode & 07777);
}

std::string CommonName(X509* cert) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf));
  return buf;
}

// "URI:...", "DNS:...", "IP:<n bytes>" for each subjectAltName entry.
std::vector<std::string> AltNames(X509* cert) {
  std::vector<std::string> out;
  std::unique_ptr<GENERAL_NAMES, X509Deleter> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    const ASN1_STRING* s = n->d.ia5;
    const std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                           static_cast<size_t>(ASN1_STRING_length(s)));
    if (n->type == GEN_URI) out.push_back("URI:" + text);
    if (n->type == GEN_DNS) out.push_back("DNS:" + text);
    if (n->type == GEN_IPADD) out.push_back("IP:" + std::to_string(text.size()) + " bytes");
  }
  return out;
}

std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = ReadFile(e.path().string());
  }
  return files;
}

std::vector<std::string> AllFiles(const DeploymentCertLayout& layout) {
  std::vector<std::string> paths = {layout.ca.cert_path, layout.ca.key_path};
  for (const auto* group : {&layout.sites, &layout.workers}) {
    for (const CertFiles& f : *group) {
      paths.push_back(f.cert_path);
      paths.push_back(f.key_path);
    }
  }
  return paths;
}

TEST(CertAuthorityTest, WritesTheLayoutWithKeysReadableOnlyByTheirOwner) {
  const std::string dir = FreshTestDir("certs") + "/certs";
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 365, false).ok());

  const DeploymentCertLayout layout = CertLayout(t, dir);
  EXPECT_EQ(layout.ca.cert_path, dir + "/ca.pem");
  EXPECT_EQ(layout.ca.key_path, dir + "/ca.key");
  ASSERT_EQ(layout.sites.size(), 3u);
  EXPECT_EQ(layout.sites[1].cert_path, dir + "/sites/eu.pem");
  EXPECT_EQ(layout.sites[1].key_path, dir + "/sites/eu.key");
  ASSERT_EQ(layout.workers.size(), 4u);
  EXPECT_EQ(layout.workers[1].cert_path, dir + "/workers/us-worker-1.pem");
  EXPECT_EQ(layout.workers[1].key_path, dir + "/workers/us-worker-1.key");

  const mode_t mask = ::umask(0);
  ::umask(mask);
  std::set<std::string> expected;
  for (const std::string& path : AllFiles(layout)) {
    expected.insert(path);
    if (path.ends_with(".key")) {
      EXPECT_EQ(Mode(path), 0600) << path;
      EXPECT_TRUE(ReadFile(path).starts_with("-----BEGIN PRIVATE KEY-----\n")) << path;  // PKCS#8, unencrypted
    } else {
      EXPECT_EQ(Mode(path), 0644 & ~static_cast<int>(mask)) << path;
      EXPECT_TRUE(ReadFile(path).starts_with("-----BEGIN CERTIFICATE-----\n")) << path;
    }
  }
  // Nothing else: no temporary file is left behind.
  std::set<std::string> found;
  for (const auto& [path, text] : Snapshot(dir)) found.insert(path);
  EXPECT_EQ(found, expected);
}

TEST(CertAuthorityTest, EveryCertificateChainsToTheCaForItsRole) {
  const std::string dir = FreshTestDir("certs");
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 30, false).ok());
  const DeploymentCertLayout layout = CertLayout(t, dir);
  const std::string& ca = layout.ca.cert_path;
  for (const CertFiles& site : layout.sites) {
    EXPECT_TRUE(Verifies(ca, site.cert_path, X509_PURPOSE_SSL_SERVER)) << site.cert_path;
    EXPECT_TRUE(Verifies(ca, site.cert_path, X509_PURPOSE_SSL_CLIENT)) << site.cert_path;
  }
  for (const CertFiles& worker : layout.workers) {
    EXPECT_TRUE(Verifies(ca, worker.cert_path, X509_PURPOSE_SSL_CLIENT)) << worker.cert_path;
    // A worker's key cannot serve as a shard.
    EXPECT_FALSE(Verifies(ca, worker.cert_path, X509_PURPOSE_SSL_SERVER)) << worker.cert_path;
  }
}

TEST(CertAuthorityTest, AnotherCasCertificatesDoNotVerify) {
  const std::string root = FreshTestDir("certs");
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, root + "/a", 365, false).ok());
  ASSERT_TRUE(WriteDeploymentCerts(t, root + "/b", 365, false).ok());
  const DeploymentCertLayout a = CertLayout(t, root + "/a");
  const DeploymentCertLayout b = CertLayout(t, root + "/b");
  EXPECT_TRUE(Verifies(b.ca.cert_path, b.sites[0].cert_path, X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(Verifies(a.ca.cert_path, b.sites[0].cert_path, X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(Verifies(a.ca.cert_path, b.workers[0].cert_path, X509_PURPOSE_SSL_CLIENT));
  EXPECT_FALSE(Verifies(b.ca.cert_path, a.workers[0].cert_path, X509_PURPOSE_SSL_CLIENT));
}

TEST(CertAuthorityTest, CertificateIdentityNamesTheSiteOrWorker) {
  const std::string dir = FreshTestDir("certs");
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 365, false).ok());
  const DeploymentCertLayout layout = CertLayout(t, dir);
  const std::vector<std::string> sites = {"geops://site/us", "geops://site/eu", "geops://site/ap"};
  const std::vector<std::string> workers = {"geops://worker/us/0", "geops://worker/us/1", "geops://worker/eu/0",
                                            "geops://worker/ap/0"};
  for (size_t i = 0; i < sites.size(); ++i) {
    Result<std::string> id = CertificateIdentity(layout.sites[i].cert_path);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(*id, sites[i]);
    EXPECT_EQ(layout.sites[i].identity, sites[i]);
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    Result<std::string> id = CertificateIdentity(layout.workers[i].cert_path);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(*id, workers[i]);
    EXPECT_EQ(layout.workers[i].identity, workers[i]);
  }

  Result<std::string> ca = CertificateIdentity(layout.ca.cert_path);
  EXPECT_EQ(ca.status().code(), StatusCode::kNotFound) << ca.status().ToString();
  Result<std::string> key = CertificateIdentity(layout.ca.key_path);
  EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << key.status().ToString();
  EXPECT_NE(key.status().message().find("ca.key is not a PEM certificate"), std::string::npos);
  Result<std::string> missing = CertificateIdentity(dir + "/nope.pem");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(CertAuthorityTest, CertificatesSayWhatTheyAre) {
  const std::string dir = FreshTestDir("certs");
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 10, false).ok());
  const DeploymentCertLayout layout = CertLayout(t, dir);

  X509Ptr ca = LoadCert(layout.ca.cert_path);
  EXPECT_EQ(CommonName(ca.get()), "geops CA demo");
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  for (int nid : {NID_basic_constraints, NID_key_usage}) {
    X509_EXTENSION* ext = X509_get_ext(ca.get(), X509_get_ext_by_NID(ca.get(), nid, -1));
    ASSERT_NE(ext, nullptr) << OBJ_nid2sn(nid);
    EXPECT_EQ(X509_EXTENSION_get_critical(ext), 1) << OBJ_nid2sn(nid);
  }
  EXPECT_EQ(X509_get_key_usage(ca.get()), static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));

  X509Ptr us = LoadCert(layout.sites[0].cert_path);
  EXPECT_EQ(CommonName(us.get()), "us");
  EXPECT_EQ(AltNames(us.get()), (std::vector<std::string>{"URI:geops://site/us", "DNS:us", "IP:4 bytes"}));
  EXPECT_EQ(X509_get_extended_key_usage(us.get()), static_cast<uint32_t>(XKU_SSL_SERVER | XKU_SSL_CLIENT));
  EXPECT_EQ(X509_check_ca(us.get()), 0);
  EXPECT_EQ(X509_check_ip_asc(us.get(), "10.1.2.3", 0), 1);
  X509Ptr eu = LoadCert(layout.sites[1].cert_path);
  EXPECT_EQ(AltNames(eu.get()), (std::vector<std::string>{"URI:geops://site/eu", "DNS:eu", "DNS:localhost"}));
  X509Ptr ap = LoadCert(layout.sites[2].cert_path);
  EXPECT_EQ(AltNames(ap.get()), (std::vector<std::string>{"URI:geops://site/ap", "DNS:ap", "IP:16 bytes"}));

  X509Ptr worker = LoadCert(layout.workers[1].cert_path);
  EXPECT_EQ(CommonName(worker.get()), "us/worker-1");
  EXPECT_EQ(AltNames(worker.get()), (std::vector<std::string>{"URI:geops://worker/us/1"}));
  EXPECT_EQ(X509_get_extended_key_usage(worker.get()), static_cast<uint32_t>(XKU_SSL_CLIENT));

  std::set<std::string> serials;
  for (X509* cert : {ca.get(), us.get(), eu.get(), ap.get(), worker.get()}) {
    EXPECT_EQ(X509_get_signature_nid(cert), NID_ecdsa_with_SHA256);
    std::unique_ptr<BIGNUM, X509Deleter> serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
    EXPECT_FALSE(BN_is_negative(serial.get()));
    EXPECT_LE(BN_num_bits(serial.get()), 128);
    EXPECT_GT(BN_num_bits(serial.get()), 64);  // random, so this fails once in 2^64
    char* hex = BN_bn2hex(serial.get());
    serials.insert(hex);
    OPENSSL_free(hex);
    // Valid from 5 minutes ago for 10 days.
    int days = 0, seconds = 0;
    ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notBefore(cert)), 1);
    EXPECT_EQ(days, 0);
    EXPECT_NEAR(seconds, -300, 30);
    ASSERT_EQ(ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(cert)), 1);
    EXPECT_NEAR(days * 86400.0 + seconds, 10 * 86400.0, 30);
    KeyPtr pub(X509_get_pubkey(cert));
    EXPECT_EQ(EVP_PKEY_get_id(pub.get()), EVP_PKEY_EC);
    char group[64] = {};
    size_t len = 0;
    EVP_PKEY_get_group_name(pub.get(), group, sizeof(group), &len);
    EXPECT_STREQ(group, "prime256v1");
  }
  EXPECT_EQ(serials.size(), 5u);
}

TEST(CertAuthorityTest, EachPrivateKeyMatchesItsOwnCertificateOnly) {
  const std::string dir = FreshTestDir("certs");
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 365, false).ok());
  const DeploymentCertLayout layout = CertLayout(t, dir);
  std::vector<CertFiles> pairs = {layout.ca};
  pairs.insert(pairs.end(), layout.sites.begin(), layout.sites.end());
  pairs.insert(pairs.end(), layout.workers.begin(), layout.workers.end());
  for (size_t i = 0; i < pairs.size(); ++i) {
    X509Ptr cert = LoadCert(pairs[i].cert_path);
    KeyPtr own = LoadKey(pairs[i].key_path);
    KeyPtr other = LoadKey(pairs[(i + 1) % pairs.size()].key_path);
    EXPECT_EQ(X509_check_private_key(cert.get(), own.get()), 1) << pairs[i].cert_path;
    EXPECT_EQ(X509_check_private_key(cert.get(), other.get()), 0) << pairs[i].cert_path;
  }
}

TEST(CertAuthorityTest, NeverReplacesACaWithoutForce) {
  const std::string root = FreshTestDir("certs");
  const std::string dir = root + "/certs";
  const config::Topology t = Demo();
  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 365, false).ok());
  const auto before = Snapshot(dir);

  Status again = WriteDeploymentCerts(t, dir, 365, false);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find(dir + "/ca.key already exists"), std::string::npos) << again.ToString();
  EXPECT_NE(again.message().find("--force"), std::string::npos) << again.ToString();
  EXPECT_EQ(Snapshot(dir), before);

  // ca.key kept offline, as docs/security.md advises: still refused.
  fs::rename(dir + "/ca.key", root + "/ca.key.offline");
  Status without_key = WriteDeploymentCerts(t, dir, 365, false);
  EXPECT_EQ(without_key.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(without_key.message().find(dir + "/ca.pem"), std::string::npos) << without_key.ToString();
  fs::rename(root + "/ca.key.offline", dir + "/ca.key");
  EXPECT_EQ(Snapshot(dir), before);

  ASSERT_TRUE(WriteDeploymentCerts(t, dir, 365, true).ok());
  const auto after = Snapshot(dir);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [path, text] : after) EXPECT_NE(text, before.at(path)) << path;
  const DeploymentCertLayout layout = CertLayout(t, dir);
  EXPECT_EQ(Mode(layout.ca.key_path), 0600);
  EXPECT_TRUE(Verifies(layout.ca.cert_path, layout.sites[0].cert_path, X509_PURPOSE_SSL_SERVER));
}

TEST(CertAuthorityTest, RefusesNamesThatCannotBeFilesAndBadValidity) {
  const std::string dir = FreshTestDir("certs");
  config::Topology t = Demo();
  EXPECT_EQ(WriteDeploymentCerts(t, dir + "/out", 0, false).code(), StatusCode::kInvalidArgument);
  t.sites[0].name = "../us";
  Status bad_name = WriteDeploymentCerts(t, dir + "/out", 365, false);
  EXPECT_EQ(bad_name.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_name.message().find("'../us'"), std::string::npos) << bad_name.ToString();
  t = Demo();
  t.sites[1].host = "bad host";
  EXPECT_EQ(WriteDeploymentCerts(t, dir + "/out", 365, false).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir + "/out"));  // nothing written
}

TEST(CertAuthorityTest, LeafCertificatesNeedAUsageAndRealAddresses) {
  Result<KeyAndCert> ca = MakeCertificateAuthority("test CA", 1);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  LeafSpec spec;
  spec.common_name = "x";
  spec.client_auth = false;
  EXPECT_EQ(MakeLeafCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument);
  spec.client_auth = true;
  spec.ips = {"10.0.0.300"};
  EXPECT_EQ(MakeLeafCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument);
  spec.ips = {"10.0.0.3"};
  EXPECT_TRUE(MakeLeafCertificate(*ca, spec).ok());
  KeyAndCert broken = *ca;
  broken.key_pem = *MakePrivateKeyPem();  // not the CA's key
  Result<KeyAndCert> mismatched = MakeLeafCertificate(broken, spec);
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().message().find("does not match"), std::string::npos);
}

TEST(CertsCommandTest, MakesCertificatesForATopologyThatStillNeedsThem) {
  const std::string dir = FreshTestDir("certs_command");
  // Beyond loopback and no [security] yet: LoadTopology refuses this file
  // until certificates exist, so `geops certs` must still read it.
  const std::string path = dir + "/t.toml";
  std::ofstream(path) << "[model]\nworkload = \"counter\"\nlayers = [4, 4]\n[[sites]]\nname = \"us\"\n"
                         "host = \"10.1.2.3\"\nworkers = 2\n";
  ASSERT_FALSE(config::LoadTopology(path).ok());
  cli::CertsArgs args;
  args.topology_path = path;
  args.out_dir = dir + "/certs";
  ASSERT_EQ(cli::RunCerts(args), 0);
  Result<std::string> id = CertificateIdentity(dir + "/certs/workers/us-worker-1.pem");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "geops://worker/us/1");
  EXPECT_TRUE(Verifies(dir + "/certs/ca.pem", dir + "/certs/sites/us.pem", X509_PURPOSE_SSL_SERVER));

  const auto before = Snapshot(dir + "/certs");
  EXPECT_EQ(cli::RunCerts(args), 2);
  EXPECT_EQ(Snapshot(dir + "/certs"), before);
  args.force = true;
  EXPECT_EQ(cli::RunCerts(args), 0);
  EXPECT_NE(ReadFile(dir + "/certs/ca.key"), before.at(dir + "/certs/ca.key"));

  // Other errors of the file are still reported.
  std::ofstream(path, std::ios::app) << "[training]\nclocks = 0\n";
  EXPECT_EQ(cli::RunCerts(args), 2);
  args.topology_path = dir + "/missing.toml";
  EXPECT_EQ(cli::RunCerts(args), 2);
}

}  // namespace
}  // namespace geops::certs
