/*
 * export_gguf - write one of assay's models as a GGUF file that llama.cpp
 * loads, for the audit fixtures (and by hand):
 *
 *   export_gguf OUT.gguf [MODEL [SEED]]     (defaults: tinygpt 1)
 *
 * MODEL is a config name (tinygpt, draft, mini, mini-draft); the weights
 * are the documented random initialisation with SEED. Prints the file's
 * weights hash. Exit status 0, or 2 with the reason on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s OUT.gguf [MODEL [SEED]]\n", argv[0]);
        return 2;
    }
    const char *name = argc > 2 ? argv[2] : "tinygpt";
    char *end = NULL;
    unsigned long long seed = argc > 3 ? strtoull(argv[3], &end, 10) : 1;
    if (argc > 3 && (end == argv[3] || *end != '\0')) {
        fprintf(stderr, "export_gguf: SEED: expected an integer, got \"%s\"\n", argv[3]);
        return 2;
    }
    struct assay_model_config cfg;
    if (assay_model_config_by_name(name, &cfg) != ASSAY_OK) {
        fprintf(stderr, "export_gguf: MODEL: expected tinygpt, draft, mini or mini-draft, got \"%s\"\n",
                name);
        return 2;
    }
    struct assay_model *m = NULL;
    enum assay_status st = assay_model_init_random(&m, &cfg, seed);
    if (st != ASSAY_OK) {
        fprintf(stderr, "export_gguf: could not build %s: %s\n", name, assay_status_str(st));
        return 2;
    }
    struct assay_diag diag;
    assay_diag_clear(&diag);
    st = assay_model_save_gguf(m, argv[1], &diag);
    if (st != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "export_gguf: %s (%s)\n", assay_diag_format(&diag, msg, sizeof msg),
                assay_status_str(st));
        assay_model_free(m);
        return 2;
    }
    printf("%s %s seed %llu sha256 %s\n", argv[1], name, seed, m->sha256);
    assay_model_free(m);
    return 0;
}
