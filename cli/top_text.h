/* cli/top_text: qprof top's screen as plain lines (ncurses draws them, --batch prints them). */
#ifndef CLI_TOP_TEXT_H
#define CLI_TOP_TEXT_H

#include "cli.h"
#include "top_view.h"

#include <glib.h>

/* What one refresh shows besides the view's numbers (all borrowed). */
struct top_screen {
    const struct prof_options *o;
    const struct prof_run_status *status;
    const char *transport, *memory; /* the target's words, as the summary gives them */
    top_view *view;
    const struct top_filter *filter;
    double samples_per_s;  /* since the last refresh */
    double paused_share;   /* of wall time since the last refresh: paused (or capturing) */
    double refresh_cpu_ms; /* qprof's CPU time for the last refresh, < 0 before one */
    double window_s;       /* 0: since the start or z */
    bool zeroed, display_paused;
    uint64_t resets;
};

/* Each appends g_strdup'd lines to lines (a GPtrArray with g_free). */
void top_text_header(const struct top_screen *sc, GPtrArray *lines);
void top_text_table(const struct top_screen *sc, size_t max_rows, GPtrArray *lines);
/* The callers of the table's row (top_view_rows' index). */
void top_text_callers(const struct top_screen *sc, size_t row, size_t max_rows, GPtrArray *lines);
/* A process (cpus false) or vCPU picker: a title, "0 all", then one numbered line per choice;
 * returns the number of choices (all included). */
size_t top_text_picker(const struct top_screen *sc, bool cpus, GPtrArray *lines);

#endif
