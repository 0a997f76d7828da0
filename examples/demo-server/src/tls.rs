//! TLS server configuration: rustls with the `ring` provider, ALPN h2 and
//! http/1.1, certificates and keys from PEM files.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Builds the server config from a PEM certificate chain and a PEM private
/// key (PKCS#8, SEC1 or PKCS#1; ECDSA, RSA or Ed25519).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("tls cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("tls cert {}: no CERTIFICATE block found", cert.display()));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("tls key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("tls cert/key {} / {}: {e}", cert.display(), key.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
