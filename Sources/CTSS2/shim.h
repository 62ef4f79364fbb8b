// The tpm2-tss 3.x headers TPMBinding uses: ESAPI, the TCTI loader (device, swtpm, mssim by name), marshalling.
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
