/*
 * rng.h - counter-based random numbers and seed derivation.
 *
 * assay never keeps a random stream whose state depends on the order in which
 * things happen. A uniform draw is a pure function of (seed, counter,
 * purpose), so a request's samples are the same alone or batched, before or
 * after preemption, with or without a KV cache. Seeds for checks are derived
 * from a master seed and the check's name, so adding a check moves no other.
 */
#ifndef ASSAY_RNG_H
#define ASSAY_RNG_H

#include <stdint.h>

/* The splitmix64 finaliser: a bijective 64-bit mix with full avalanche. */
uint64_t assay_mix64(uint64_t x);

/* FNV-1a 64 of a NUL-terminated string (NULL hashes like ""). */
uint64_t assay_hash_str(const char *s);

/*
 * A seed for the thing called `name` under `master`: mix64 of both. Never
 * returns 0 (GSL's mt19937 treats seed 0 as its default seed 4357).
 */
uint64_t assay_seed_derive(uint64_t master, const char *name);

/*
 * A uniform double in [0, 1) with 53 random bits, a pure function of
 * (seed, counter, purpose). Distinct (counter, purpose) pairs under one seed
 * give independent draws for every practical purpose.
 */
double assay_rng_u01(uint64_t seed, uint64_t counter, uint32_t purpose);

#endif
