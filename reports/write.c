/*
 * write.c - writing reports safely (write.h): assay_report_write_file writes
 * one file through a temporary name, fsync and rename, and
 * assay_report_write_all / _write_renderings write a report's JSON, HTML and
 * Markdown as one, renaming none into place until all are complete. The
 * commands write their reports here (cli/common.c), and kill_matrix.c its
 * files.
 */
#include "write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/alloc.h"
#include "html.h"
#include "markdown.h"
#include "report.h"

static enum assay_status io_error(struct assay_diag *diag, const char *path, const char *what,
                                  const char *expected, int err)
{
    assay_diag_set(diag, path, what, expected, "%s", strerror(err));
    return ASSAY_ERR_IO;
}

/* The directory part of path into dir: "." for a bare name, "/" for a
 * file at the root. Returns dir. */
static const char *dir_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, size, ".");
    } else if (slash == path) {
        snprintf(dir, size, "/");
    } else {
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
    }
    return dir;
}

/* Write len bytes to a new temporary file beside path (".NAME.XXXXXX" in
 * its directory), flushed to disk; its name goes to tmp. On failure nothing
 * is left behind. */
static enum assay_status write_temp(const char *path, const char *data, size_t len, char *tmp,
                                    size_t tmp_size, struct assay_diag *diag)
{
    const char *slash = strrchr(path, '/');
    char dir[1024];
    dir_of(path, dir, sizeof dir);
    const char *base = slash != NULL ? slash + 1 : path;
    int w = snprintf(tmp, tmp_size, "%s/.%s.XXXXXX", dir, base);
    if (w < 0 || (size_t)w >= tmp_size || base[0] == '\0') {
        assay_diag_set(diag, path, "", "a file path of at most 1000 bytes", "%s", "a longer one");
        return ASSAY_ERR_IO;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        return io_error(diag, path, "creating a temporary file in its directory",
                        "an existing, writable directory", errno);
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            char expected[64];
            snprintf(expected, sizeof expected, "room for %zu bytes", len);
            return io_error(diag, path, "writing", expected, err);
        }
        done += (size_t)n;
    }
    if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
        int err = errno;
        close(fd);
        unlink(tmp);
        return io_error(diag, path, "flushing to disk", "a working file system", err);
    }
    if (close(fd) != 0) {
        int err = errno;
        unlink(tmp);
        return io_error(diag, path, "closing", "a working file system", err);
    }
    return ASSAY_OK;
}

/* Write n files as one: every file goes to a temporary name first, and
 * only when all are complete are they renamed into place. A failure before
 * the renames leaves every destination as it was, so a report's JSON, HTML
 * and Markdown never disagree (a new report.json beside an old
 * report.html). */
static enum assay_status write_files(size_t n, const char *const *paths, const char *const *data,
                                     const size_t *lens, struct assay_diag *diag)
{
    enum { MAX_FILES = 4 };
    char tmp[MAX_FILES][1200];
    size_t written = 0;
    enum assay_status st = n <= MAX_FILES ? ASSAY_OK : ASSAY_ERR_INVALID;
    for (; written < n && st == ASSAY_OK; written++) {
        st = write_temp(paths[written], data[written], lens[written], tmp[written],
                        sizeof tmp[written], diag);
        if (st != ASSAY_OK) {
            break;
        }
    }
    for (size_t i = 0; i < n && st == ASSAY_OK; i++) {
        if (rename(tmp[i], paths[i]) != 0) {
            st = io_error(diag, paths[i], "renaming into place", "a replaceable destination",
                          errno);
            /* The files before it are in place; the rest are not. */
            for (size_t j = i; j < written; j++) {
                unlink(tmp[j]);
            }
            return st;
        }
    }
    if (st != ASSAY_OK) {
        for (size_t j = 0; j < written; j++) {
            unlink(tmp[j]);
        }
        return st;
    }
    /* Make the renames durable (best effort: some file systems refuse to
     * fsync a directory). */
    for (size_t i = 0; i < n; i++) {
        char dir[1024];
        int dfd = open(dir_of(paths[i], dir, sizeof dir), O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    return ASSAY_OK;
}

enum assay_status assay_report_write_file(const char *path, const char *data, size_t len,
                                          struct assay_diag *diag)
{
    assay_diag_clear(diag);
    return write_files(1, &path, &data, &len, diag);
}

static enum assay_status make_path(char *out, size_t size, const char *dir, const char *base,
                                   const char *ext, struct assay_diag *diag)
{
    int n = snprintf(out, size, "%s/%s.%s", dir, base, ext);
    if (n < 0 || (size_t)n >= size) {
        assay_diag_set(diag, dir, "", "a directory path of at most 1000 bytes", "%s",
                       "a longer one");
        return ASSAY_ERR_IO;
    }
    return ASSAY_OK;
}

/* Render the HTML and Markdown of report and write them, with json_text
 * (when not NULL) as paths->json, all three as one (write_files). */
static enum assay_status render_and_write(const cJSON *report, const char *json_text,
                                          size_t json_len, struct assay_report_paths *paths,
                                          struct assay_diag *diag)
{
    char *html = NULL, *md = NULL;
    size_t html_len = 0, md_len = 0;
    enum assay_status st = assay_report_render_html(report, &html, &html_len);
    if (st == ASSAY_OK) {
        st = assay_report_render_markdown(report, &md, &md_len);
    }
    if (st == ASSAY_OK) {
        const char *names[3] = {paths->html, paths->md, paths->json};
        const char *data[3] = {html, md, json_text};
        size_t lens[3] = {html_len, md_len, json_len};
        st = write_files(json_text != NULL ? 3 : 2, names, data, lens, diag);
    }
    assay_free(html);
    assay_free(md);
    return st;
}

enum assay_status assay_report_write_renderings(const cJSON *report, const char *dir,
                                                const char *base, struct assay_report_paths *paths,
                                                struct assay_diag *diag)
{
    assay_diag_clear(diag);
    paths->json[0] = '\0';
    enum assay_status st = assay_report_validate(report, diag);
    if (st == ASSAY_OK) {
        st = make_path(paths->html, sizeof paths->html, dir, base, "html", diag);
    }
    if (st == ASSAY_OK) {
        st = make_path(paths->md, sizeof paths->md, dir, base, "md", diag);
    }
    return st == ASSAY_OK ? render_and_write(report, NULL, 0, paths, diag) : st;
}

enum assay_status assay_report_write_all(const cJSON *report, const char *dir, const char *base,
                                         struct assay_report_paths *paths, struct assay_diag *diag)
{
    assay_diag_clear(diag);
    enum assay_status st = assay_report_validate(report, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if ((st = make_path(paths->json, sizeof paths->json, dir, base, "json", diag)) != ASSAY_OK ||
        (st = make_path(paths->html, sizeof paths->html, dir, base, "html", diag)) != ASSAY_OK ||
        (st = make_path(paths->md, sizeof paths->md, dir, base, "md", diag)) != ASSAY_OK) {
        return st;
    }
    char *text = NULL;
    size_t len = 0;
    if ((st = assay_report_print(report, &text, &len)) != ASSAY_OK) {
        return st;
    }
    /* Render from the text as written, exactly as `assay report` will.
     * cJSON printed that text, so it is well-formed: when it does not parse
     * back, memory ran out (cJSON tells no other reason). */
    cJSON *back = cJSON_ParseWithLength(text, len);
    st = back != NULL ? assay_report_validate(back, diag) : ASSAY_ERR_NOMEM;
    if (st == ASSAY_OK) {
        st = render_and_write(back, text, len, paths, diag);
    }
    cJSON_Delete(back);
    assay_free(text);
    return st;
}
