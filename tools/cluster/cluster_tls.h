#pragma once
// The launcher's throwaway certificates for mutual TLS between its nodes
// (estuaryd --cluster-tls-cert/--cluster-tls-key/--cluster-tls-ca), made
// with the `openssl` command line in DIR/tls: the CA scripts/start.sh makes
// there (ca.pem, ca.key: an EC P-256 CA, "Estuary throwaway CA") is made
// the same way if missing and reused if present, so one CA signs both the
// client listeners' certificate and the nodes'; node-K.pem/node-K.key
// (CN=estuary-node-K, IP:127.0.0.1 and any `addresses` given, serverAuth and clientAuth: each node is
// the TLS server of the links it accepts and the client of those it dials)
// are made for each node at every start. Keys are 0600.
#include <string>
#include <vector>

namespace estuary::launcher {

struct NodeCertificate {
  std::string cert, key;
};

// The `openssl` on PATH (or /usr/bin/openssl), "" when there is none.
std::string FindOpenssl();
// Makes the CA (if missing) and node-1..node-N in `folder`, each naming
// 127.0.0.1 and `addresses` (the nodes' namespace addresses with --netns);
// false with `error` (the failing command and its log file) otherwise.
bool MakeClusterCertificates(const std::string& openssl, const std::string& folder, int nodes, std::string* error,
                             const std::vector<std::string>& addresses = {});
NodeCertificate NodeCertificateIn(const std::string& folder, int node);

}  // namespace estuary::launcher
