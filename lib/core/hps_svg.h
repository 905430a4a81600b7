/* hps_svg: a small writer of self-contained SVG pictures (no scripts, no
 * external fonts or files), and line charts on it: the Pareto frontier of
 * hps-plan, a plan's stages, training curves of hps-train.
 *
 * Coordinates are pixels from the top left.  Text is XML-escaped here, so
 * callers pass names as they are.
 */
#ifndef HPS_SVG_H
#define HPS_SVG_H

#include <stdio.h>

void hps_svg_begin(FILE *f, int width, int height, const char *title);
void hps_svg_end(FILE *f);

/* anchor: "start", "middle" or "end"; weight: "normal" or "bold". */
void hps_svg_text(FILE *f, double x, double y, int size, const char *anchor, const char *weight,
                  const char *fill, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
void hps_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width,
                  int dashed);
void hps_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *stroke);

/* Colours of the charts' series and of plan stages, in order. */
const char *hps_svg_color(int i);

/* One series of a chart (a NULL name: not in the legend): n points; step draws a staircase that rises at
 * each point's x to the next point's y (the price of the next point holds
 * for every x above this one), for prices that jump. */
typedef struct {
    const char *name, *color;
    int n;
    const double *x, *y;
    int step, dashed, marks;
} hps_svg_series;

/* A chart's place on the picture and its labels; ymin_zero starts y at 0;
 * logy draws y on a log scale (values <= 0 left out), for rates and times
 * that differ by orders of magnitude. */
typedef struct {
    double x, y, w, h;
    const char *title, *xlabel, *ylabel;
    int ymin_zero, logy;
    double xmin, xmax; /* the x range when xmax > xmin (charts side by side); else the data's */
} hps_svg_axes;

/* A horizontal axis for values lo..hi from x to x + w at height y: a rule,
 * ticks labelled as the charts' are, and its label after its end; for bars
 * drawn by hand (a plan's stages). */
void hps_svg_xaxis(FILE *f, double x, double y, double w, double lo, double hi, const char *label);

/* Frame, ticks, grid, the series and their legend.  Series with n == 0 are
 * listed in the legend only; a chart with no points says "no data". */
void hps_svg_chart(FILE *f, const hps_svg_axes *ax, const hps_svg_series *s, int n_series);

#endif
