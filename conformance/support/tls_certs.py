"""Certificates for the TLS process tests, made at test time with the
`openssl` command line (OpenSSL 3) into a folder: a CA and a server
certificate for 127.0.0.1/localhost, client certificates signed by the CA
(valid, expired, not yet valid, revoked with a CRL), a second CA that signs
nothing the broker trusts, and a self-signed client certificate.

    certs = TlsCerts(folder)        # makes the CA, server and "device-1" client
    certs.client("device-2")        # -> (cert path, key path)
    certs.client("old", start="20200101000000Z", end="20200201000000Z")
    certs.revoke(cert_path); certs.crl()   # -> CRL path
"""

import os
import subprocess

CA_CONFIG = """[ca]
default_ca = estuary_test
[estuary_test]
dir = {dir}
database = {dir}/index.txt
new_certs_dir = {dir}/issued
serial = {dir}/serial
crlnumber = {dir}/crlnumber
certificate = {dir}/ca.pem
private_key = {dir}/ca.key
default_md = sha256
default_days = 30
default_crl_days = 30
policy = anything
unique_subject = no
copy_extensions = copy
[anything]
commonName = supplied
[client]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = clientAuth
[server]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
"""


def openssl(*args):
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), done.stderr.strip()))


class TlsCerts:
    def __init__(self, folder, ca_name="Estuary Test CA"):
        self.dir = folder
        os.makedirs(os.path.join(folder, "issued"), exist_ok=True)
        open(self.path("index.txt"), "w").close()
        with open(self.path("serial"), "w") as handle:
            handle.write("1000\n")
        with open(self.path("crlnumber"), "w") as handle:
            handle.write("1000\n")
        with open(self.path("ca.cnf"), "w") as handle:
            handle.write(CA_CONFIG.format(dir=folder))
        self.ca = self.path("ca.pem")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", self.path("ca.key"), "-out", self.ca, "-days", "30", "-subj", "/CN=" + ca_name,
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self.server_cert, self.server_key = self.sign("server", "localhost", "server")
        self.client_cert, self.client_key = self.client("device-1")

    def path(self, name):
        return os.path.join(self.dir, name)

    def sign(self, name, common_name, extensions, start=None, end=None):
        key, request, cert = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".pem")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", request, "-subj", "/CN=" + common_name)
        dates = []
        if start:
            dates += ["-startdate", start]
        if end:
            dates += ["-enddate", end]
        openssl("ca", "-batch", "-config", self.path("ca.cnf"), "-extensions", extensions, "-in", request,
                "-out", cert, "-notext", *dates)
        return cert, key

    def client(self, common_name, start=None, end=None):
        return self.sign("client-" + common_name, common_name, "client", start, end)

    def self_signed(self, common_name):
        key, cert = self.path("self-" + common_name + ".key"), self.path("self-" + common_name + ".pem")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", cert, "-days", "30", "-subj", "/CN=" + common_name)
        return cert, key

    def revoke(self, cert):
        openssl("ca", "-config", self.path("ca.cnf"), "-revoke", cert)

    def crl(self):
        out = self.path("crl.pem")
        openssl("ca", "-config", self.path("ca.cnf"), "-gencrl", "-out", out)
        return out
