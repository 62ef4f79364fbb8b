// Per-message cost of OpenSSL 3.0 AES-256-GCM on one kept key, 4 KiB chunks: through EVP against the provider's own
// dispatch functions (what the chunk cipher calls since issue 23, item 4); BENCHMARKS.md, "The pipeline after the backend".
// Build and run: gcc -O2 -o /tmp/dispatch dispatch.c -lcrypto && taskset -c 1 /tmp/dispatch
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static unsigned char key[32], nonce[12], ad[40], pt[4096], ct[4096], tag[16], tag2[16], out[4096];
static OSSL_FUNC_cipher_newctx_fn *p_new; static OSSL_FUNC_cipher_encrypt_init_fn *p_einit; static OSSL_FUNC_cipher_decrypt_init_fn *p_dinit;
static OSSL_FUNC_cipher_update_fn *p_update; static OSSL_FUNC_cipher_final_fn *p_final; static OSSL_FUNC_cipher_set_ctx_params_fn *p_set; static OSSL_FUNC_cipher_get_ctx_params_fn *p_get;
static OSSL_FUNC_cipher_freectx_fn *p_free;
static EVP_CIPHER_CTX *ectx; static void *pctx;
static int evp_seal(void){ int w; return EVP_CipherInit_ex(ectx,NULL,NULL,NULL,nonce,1) && EVP_CipherUpdate(ectx,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(ectx,ct,&w,pt,4096) && EVP_CipherFinal_ex(ectx,ct+4096,&w) && EVP_CIPHER_CTX_ctrl(ectx,EVP_CTRL_GCM_GET_TAG,16,tag);}
static int evp_open(void){ int w; return EVP_CipherInit_ex(ectx,NULL,NULL,NULL,nonce,0) && EVP_CIPHER_CTX_ctrl(ectx,EVP_CTRL_GCM_SET_TAG,16,tag) && EVP_CipherUpdate(ectx,NULL,&w,ad,sizeof ad) && EVP_CipherUpdate(ectx,out,&w,ct,4096) && EVP_CipherFinal_ex(ectx,out+4096,&w);}
static int prov_seal(void){ size_t w; OSSL_PARAM p[2]={OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG,tag2,16),OSSL_PARAM_END};
  return p_einit(pctx,NULL,0,nonce,12,NULL) && p_update(pctx,NULL,&w,sizeof ad,ad,sizeof ad) && p_update(pctx,ct,&w,4096,pt,4096) && p_final(pctx,ct+4096,&w,0) && p_get(pctx,p);}
static int prov_open(void){ size_t w; OSSL_PARAM p[2]={OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG,tag,16),OSSL_PARAM_END};
  return p_dinit(pctx,NULL,0,nonce,12,NULL) && p_set(pctx,p) && p_update(pctx,NULL,&w,sizeof ad,ad,sizeof ad) && p_update(pctx,out,&w,4096,ct,4096) && p_final(pctx,out+4096,&w,0);}
static int prov_iv(void){ return p_dinit(pctx,NULL,0,nonce,12,NULL);}
static int evp_iv(void){ return EVP_CipherInit_ex(ectx,NULL,NULL,NULL,nonce,0);}
int main(int argc,char**argv){
  EVP_CIPHER *aes=EVP_CIPHER_fetch(NULL,"AES-256-GCM",NULL);
  for(int i=0;i<32;i++)key[i]=i;
  for(int i=0;i<4096;i++)pt[i]=i*7;
  OSSL_PROVIDER *prov=(OSSL_PROVIDER*)EVP_CIPHER_get0_provider(aes); int nc; const OSSL_ALGORITHM *alg=OSSL_PROVIDER_query_operation(prov,OSSL_OP_CIPHER,&nc);
  const OSSL_DISPATCH *d=NULL; for(;alg->algorithm_names;alg++){ if(!strncmp(alg->algorithm_names,"AES-256-GCM:",12)){d=alg->implementation;break;} }
  if(!d){puts("no dispatch");return 1;}
  for(;d->function_id;d++) switch(d->function_id){
    case OSSL_FUNC_CIPHER_NEWCTX:p_new=(void*)d->function;break; case OSSL_FUNC_CIPHER_ENCRYPT_INIT:p_einit=(void*)d->function;break;
    case OSSL_FUNC_CIPHER_DECRYPT_INIT:p_dinit=(void*)d->function;break; case OSSL_FUNC_CIPHER_UPDATE:p_update=(void*)d->function;break;
    case OSSL_FUNC_CIPHER_FINAL:p_final=(void*)d->function;break; case OSSL_FUNC_CIPHER_SET_CTX_PARAMS:p_set=(void*)d->function;break;
    case OSSL_FUNC_CIPHER_GET_CTX_PARAMS:p_get=(void*)d->function;break; case OSSL_FUNC_CIPHER_FREECTX:p_free=(void*)d->function;break;}
  pctx=p_new(OSSL_PROVIDER_get0_provider_ctx(prov)); p_einit(pctx,key,32,NULL,0,NULL);
  ectx=EVP_CIPHER_CTX_new(); EVP_CipherInit_ex(ectx,aes,NULL,key,NULL,1);
  if(!evp_seal()||!prov_seal()||memcmp(tag,tag2,16)){puts("seal mismatch");return 1;}
  if(!evp_open()||!prov_open()||memcmp(out,pt,4096)){puts("open mismatch");return 1;}
  tag[0]^=1; if(prov_open()){puts("forgery accepted");return 1;} tag[0]^=1;
  struct {const char*n; int(*f)(void);} t[]={{"EVP seal 4 KiB (today)",evp_seal},{"provider dispatch seal 4 KiB",prov_seal},{"EVP open 4 KiB (today)",evp_open},{"provider dispatch open 4 KiB",prov_open},{"EVP set iv",evp_iv},{"provider set iv",prov_iv}};
  int n=6, iters=argc>1?atoi(argv[1]):20000; double best[8]; for(int i=0;i<n;i++)best[i]=1e9;
  for(int r=0;r<11;r++) for(int i=0;i<n;i++){ double t0=now(); for(int k=0;k<iters;k++) t[i].f(); double ns=(now()-t0)/iters*1e9; if(ns<best[i])best[i]=ns; }
  for(int i=0;i<n;i++) printf("%-40s %7.0f ns\n",t[i].n,best[i]);
  p_free(pctx); EVP_CIPHER_CTX_free(ectx); return 0;
}
