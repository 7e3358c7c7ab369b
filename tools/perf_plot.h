/*
 * cw-perf --plot: latency and bandwidth against size, drawn by gnuplot
 * (Debian package gnuplot-nox) into a PNG, from a run's results or from
 * cw-perf --json files (several: direct and through a gateway, side by
 * side in the same axes).
 */
#ifndef CW_PERF_PLOT_H
#define CW_PERF_PLOT_H

#include <stdbool.h>
#include <stddef.h>

/** One measured size: latency of a call and the payload bandwidth. */
struct plot_point {
    double size;    /**< bytes */
    double lat_us;  /**< lat: median per call; rate, bw: p50 per call */
    double bw_mibs; /**< bw: median; lat: size / latency; rate: size x
                         rate */
};

/** One line of the plot: one test (and direction) of one run or file. */
struct plot_series {
    char *label;
    struct plot_point *pts;
    size_t n;
};

struct plot {
    struct plot_series *s;
    size_t n;
};

/**
 * Add one series.  @p test is "lat", "rate" or "bw"; each point's two
 * figures are derived from the @p median of that test and the per-call
 * @p p50_us (see struct plot_point).
 * @return 0, or -1 (out of memory, or an unknown test).
 */
int perf_plot_add(struct plot *p, const char *label, const char *test,
                  const double *size, const double *median,
                  const double *p50_us, size_t n);

/**
 * Add the series of one run: one, or one per direction for bw (@p dir[i]
 * is "", "pull" or "push"), labelled "NAME TEST [DIR]".  At most 64
 * results.
 * @return 0, or -1 (out of memory, too many results, an unknown test).
 */
int perf_plot_add_run(struct plot *p, const char *name, const char *test,
                      const char *const *dir, const double *size,
                      const double *median, const double *p50_us, size_t n);

/**
 * Add the series of a cw-perf --json file (one run per line; each run one
 * series, or two for bw in both directions), labelled by the file's name
 * and the test.
 * @return 0, or -1 with @p err saying FILE:LINE and what is wrong.
 */
int perf_plot_add_file(struct plot *p, const char *path, char *err,
                       size_t errlen);

/** Whether a gnuplot program is on PATH. */
bool perf_plot_have_gnuplot(void);

/**
 * Draw every series into @p png with gnuplot: latency (left) and
 * bandwidth (right) against size, log scales.  Sizes of 0 have no place
 * on a log scale and are left out.
 * @return 0, or -1 with @p err saying why (gnuplot absent or failed,
 *         nothing to draw, a file that could not be written).
 */
int perf_plot_draw(const struct plot *p, const char *title, const char *png,
                   char *err, size_t errlen);

/** Free every series; @p p is empty again. */
void perf_plot_free(struct plot *p);

#endif /* CW_PERF_PLOT_H */
