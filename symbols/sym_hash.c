/* The .text hash: first 8 bytes of SHA-256, big-endian. */
#include <glib.h>

#include "sym_internal.h"

uint64_t sym_text_hash_from_checksum(GChecksum *sha256)
{
    guint8 digest[32];
    gsize digest_len = sizeof(digest);
    uint64_t hash = 0;

    g_checksum_get_digest(sha256, digest, &digest_len);
    for (int i = 0; i < 8; i++)
        hash = (hash << 8) | digest[i];
    return hash;
}

uint64_t sym_text_hash(const void *text, size_t len)
{
    GChecksum *sha256 = g_checksum_new(G_CHECKSUM_SHA256);
    uint64_t hash;

    /* g_checksum_update takes a gssize length; feed huge buffers in pieces. */
    const guchar *bytes = text;
    while (len > 0) {
        size_t piece = len > G_MAXSSIZE ? G_MAXSSIZE : len;
        g_checksum_update(sha256, bytes, (gssize)piece);
        bytes += piece;
        len -= piece;
    }
    hash = sym_text_hash_from_checksum(sha256);
    g_checksum_free(sha256);
    return hash;
}
