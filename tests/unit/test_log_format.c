/*
 * Log line formats (util/log.c): with stderr on the journal (JOURNAL_STREAM
 * naming stderr's device and inode) each line starts with a syslog
 * priority "<N>" so that journalctl -p filters; otherwise with an ISO 8601
 * UTC time.  A stale JOURNAL_STREAM (stderr redirected since) is ignored.
 * Each case runs in a child of its own: the format is decided once per
 * process.  TAP.
 */
#include <causeway/log.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum mode { JOURNAL, PLAIN, STALE };

/* Child: stderr to @p path, JOURNAL_STREAM as @p mode says, three lines. */
static void child(enum mode mode, const char *path)
{
    struct stat st;
    char env[64];

    if (freopen(path, "w", stderr) == NULL || fstat(STDERR_FILENO, &st))
        _exit(3);
    snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (mode == STALE ? 1 : 0));
    if (mode == PLAIN)
        unsetenv("JOURNAL_STREAM");
    else
        setenv("JOURNAL_STREAM", env, 1);
    cw_log_set_level(CW_LOG_DEBUG);
    CW_ERROR("test", "an error %d", 1);
    CW_WARN("test", "a warning");
    CW_DEBUG("test", "a debug line");
    fflush(stderr);
    _exit(0);
}

/* Whether every line of @p path matches the @p n patterns in order. */
static int check(const char *path, const char *const *pats, int n)
{
    FILE *f = fopen(path, "r");
    char line[1200];
    int i = 0;
    int ok = f != NULL;

    while (ok && fgets(line, sizeof(line), f) != NULL) {
        regex_t re;
        line[strcspn(line, "\n")] = '\0';
        if (i >= n || regcomp(&re, pats[i], REG_EXTENDED | REG_NOSUB)) {
            ok = 0;
            break;
        }
        if (regexec(&re, line, 0, NULL, 0) != 0) {
            printf("# line %d: %s\n# does not match %s\n", i + 1, line,
                   pats[i]);
            ok = 0;
        }
        regfree(&re);
        i++;
    }
    if (f)
        fclose(f);
    return ok && i == n;
}

int main(void)
{
    static const char *const journal[] = {
        "^<3>error test: an error 1 \\(test_log_format\\.c:[0-9]+ child\\)$",
        "^<4>warn  test: a warning \\(",
        "^<7>debug test: a debug line \\(",
    };
    static const char *const plain[] = {
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z "
        "[0-9]+ error test: an error 1 \\(",
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z [0-9]+ warn  test: "
        "a warning \\(",
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z [0-9]+ debug test: "
        "a debug line \\(",
    };
    static const struct {
        enum mode mode;
        const char *const *pats;
        const char *what;
    } cases[] = {
        {JOURNAL, journal, "stderr is the journal: <N> syslog priorities"},
        {PLAIN, plain, "no journal: ISO 8601 UTC timestamps"},
        {STALE, plain, "JOURNAL_STREAM of another stream: timestamps"},
    };
    char dir[] = "/tmp/cw-log-format.XXXXXX";
    int fails = 0;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    printf("1..3\n");
    for (int c = 0; c < 3; c++) {
        char path[64];
        int status = 0;
        pid_t pid;

        snprintf(path, sizeof(path), "%s/%d.log", dir, c);
        fflush(stdout);
        pid = fork();
        if (pid == 0)
            child(cases[c].mode, path);
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0 || !check(path, cases[c].pats, 3)) {
            printf("not ok %d - %s\n", c + 1, cases[c].what);
            fails++;
        } else {
            printf("ok %d - %s\n", c + 1, cases[c].what);
        }
        unlink(path);
    }
    rmdir(dir);
    return fails ? 1 : 0;
}
