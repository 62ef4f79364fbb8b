// What dp-aead calls in Debian's OpenSSL 3.0 libcrypto directly (the EVP cipher interface), for the AEAD candidates.
#include <openssl/evp.h>
#include <openssl/crypto.h>
