// One 4 KiB AES-256-GCM chunk opened under a fresh key (a small file's open), by backend and path; BENCHMARKS.md,
// "The pipeline after the backend". Build and run: gcc -O2 -o /tmp/onechunk onechunk.c -lcrypto -lsodium && taskset -c 1 /tmp/onechunk
#include <stdlib.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static unsigned char key[32], nonce[12], ad[40], pt[4096], ct[4096], tag[16], out[4096];
static EVP_CIPHER *aes;
static int ossl_fresh(void){ // new ctx + key + iv + open + free
  EVP_CIPHER_CTX *c=EVP_CIPHER_CTX_new(); int w, ok;
  EVP_CipherInit_ex(c,aes,NULL,key,NULL,0);
  ok = EVP_CipherInit_ex(c,NULL,NULL,NULL,nonce,0) && EVP_CIPHER_CTX_ctrl(c,EVP_CTRL_GCM_SET_TAG,16,tag)
   && EVP_CipherUpdate(c,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(c,out,&w,ct,4096) && EVP_CipherFinal_ex(c,out+4096,&w);
  EVP_CIPHER_CTX_free(c); return ok;}
static int ossl_fresh1(void){ // new ctx + key&iv in one init + open + free
  EVP_CIPHER_CTX *c=EVP_CIPHER_CTX_new(); int w, ok;
  ok = EVP_CipherInit_ex(c,aes,NULL,key,nonce,0) && EVP_CIPHER_CTX_ctrl(c,EVP_CTRL_GCM_SET_TAG,16,tag)
   && EVP_CipherUpdate(c,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(c,out,&w,ct,4096) && EVP_CipherFinal_ex(c,out+4096,&w);
  EVP_CIPHER_CTX_free(c); return ok;}
static EVP_CIPHER_CTX *kept;
static int ossl_rekey(void){ // kept ctx, rekey with NULL cipher
  int w; EVP_CIPHER_CTX *c=kept;
  return EVP_CipherInit_ex(c,NULL,NULL,key,nonce,0) && EVP_CIPHER_CTX_ctrl(c,EVP_CTRL_GCM_SET_TAG,16,tag)
   && EVP_CipherUpdate(c,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(c,out,&w,ct,4096) && EVP_CipherFinal_ex(c,out+4096,&w);}
static int ossl_keyed(void){ // kept ctx, same key, iv only (per-message cost)
  int w; EVP_CIPHER_CTX *c=kept;
  return EVP_CipherInit_ex(c,NULL,NULL,NULL,nonce,0) && EVP_CIPHER_CTX_ctrl(c,EVP_CTRL_GCM_SET_TAG,16,tag)
   && EVP_CipherUpdate(c,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(c,out,&w,ct,4096) && EVP_CipherFinal_ex(c,out+4096,&w);}
static int sod_state(void){ crypto_aead_aes256gcm_state st; crypto_aead_aes256gcm_beforenm(&st,key);
  int r = crypto_aead_aes256gcm_decrypt_detached_afternm(out,NULL,ct,4096,tag,ad,sizeof ad,nonce,&st)==0; sodium_memzero(&st,sizeof st); return r;}
static int sod_oneshot(void){ return crypto_aead_aes256gcm_decrypt_detached(out,NULL,ct,4096,tag,ad,sizeof ad,nonce,key)==0;}
static int ossl_keyonly(void){ EVP_CIPHER_CTX *c=EVP_CIPHER_CTX_new(); int ok=EVP_CipherInit_ex(c,aes,NULL,key,NULL,0); EVP_CIPHER_CTX_free(c); return ok;}
static int ossl_rekeyonly(void){ return EVP_CipherInit_ex(kept,NULL,NULL,key,NULL,0);}
static int ossl_ivonly(void){ return EVP_CipherInit_ex(kept,NULL,NULL,NULL,nonce,0);}
static int ossl_settag(void){ return EVP_CIPHER_CTX_ctrl(kept,EVP_CTRL_GCM_SET_TAG,16,tag);}
int main(int argc,char**argv){
  if (sodium_init() < 0) return 1;
  aes=EVP_CIPHER_fetch(NULL,"AES-256-GCM",NULL);
  randombytes_buf(key,32); randombytes_buf(nonce,12); randombytes_buf(pt,4096);
  crypto_aead_aes256gcm_encrypt_detached(ct,tag,NULL,pt,4096,ad,sizeof ad,NULL,nonce,key);
  kept=EVP_CIPHER_CTX_new(); EVP_CipherInit_ex(kept,aes,NULL,key,NULL,0);
  struct {const char*n; int(*f)(void);} t[]={{"openssl fresh ctx (today)",ossl_fresh},{"openssl fresh ctx, key+iv one init",ossl_fresh1},{"openssl kept ctx, rekeyed",ossl_rekey},{"openssl kept ctx, same key (per message)",ossl_keyed},
    {"libsodium beforenm+afternm",sod_state},{"libsodium one-shot",sod_oneshot},{"  part: openssl new+key+free",ossl_keyonly},{"  part: openssl rekey kept",ossl_rekeyonly},{"  part: openssl iv only",ossl_ivonly},{"  part: openssl set tag",ossl_settag}};
  int n=sizeof t/sizeof t[0], iters=argc>1?atoi(argv[1]):20000; double best[16]; for(int i=0;i<n;i++)best[i]=1e9;
  for(int i=0;i<n;i++) if(!t[i].f()) {printf("FAIL %s\n",t[i].n);}
  for(int r=0;r<9;r++) for(int i=0;i<n;i++){ double t0=now(); for(int k=0;k<iters;k++) t[i].f(); double ns=(now()-t0)/iters*1e9; if(ns<best[i])best[i]=ns; }
  for(int i=0;i<n;i++) printf("%-45s %8.0f ns\n",t[i].n,best[i]);
}
