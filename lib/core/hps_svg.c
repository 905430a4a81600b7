#include "core/hps_svg.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* control bytes are not allowed in XML 1.0 text */
            if ((unsigned char)*s >= 0x20) fputc(*s, f);
        }
    }
}

void hps_svg_begin(FILE *f, int width, int height, const char *title)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>",
            width, height, width, height);
    put_escaped(f, title);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
}

void hps_svg_end(FILE *f) { fputs("</svg>\n", f); }

void hps_svg_text(FILE *f, double x, double y, int size, const char *anchor, const char *weight,
                  const char *fill, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\" font-weight=\"%s\" fill=\"%s\">",
            x, y, size, anchor, weight, fill);
    put_escaped(f, buf);
    fputs("</text>\n", f);
}

void hps_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width,
                  int dashed)
{
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>\n",
            x1, y1, x2, y2, stroke, width, dashed ? " stroke-dasharray=\"6,4\"" : "");
}

void hps_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *stroke)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>\n", x, y,
            w, h, fill, stroke);
}

const char *hps_svg_color(int i)
{
    /* Okabe-Ito: told apart also by colour-blind readers */
    static const char *const colors[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                         "#e69f00", "#56b4e9", "#f0e442", "#000000"};
    return colors[(i < 0 ? -i : i) % 8];
}

/* ---- charts ----------------------------------------------------------------- */

/* A tick step of 1, 2 or 5 times a power of ten giving about 5 ticks;
 * half is half the span (a span of two huge values of opposite sign
 * overflows, its half does not). */
static double tick_step(double half)
{
    double raw = half / 2.5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void label_as(char *buf, size_t n, double v, int digits)
{
    double a = fabs(v);
    if (digits) snprintf(buf, n, "%.*g", digits, v);
    else if (a >= 1e6) snprintf(buf, n, "%.4gM", v / 1e6);
    else if (a > 0 && a < 1e-3) snprintf(buf, n, "%.3g", v);
    else {
        double r = round(v * 1e6) / 1e6;
        snprintf(buf, n, "%.10g", r == 0 ? 0.0 : r); /* a tick a hair below zero reads 0, not -0 */
    }
}

/* The short label, unless it would not tell this tick from the next one
 * (steps of 16 at 1e17): then as many digits as the step needs. */
static void tick_label(char *buf, size_t n, double v, double st)
{
    char next[64];
    label_as(buf, n, v, 0);
    label_as(next, sizeof next, v + st, 0);
    if (strcmp(buf, next) != 0) return;
    double digits = ceil(log10(fmax(fabs(v), fabs(v + st)) / st)) + 2;
    label_as(buf, n, v, (int)fmin(fmax(digits, 1), 17));
}

typedef struct {
    double x0, x1, y0, y1; /* y in log10 on a log scale */
} range;

/* An axis that can be drawn whatever the data: finite, and at least a
 * billionth of its magnitude wide (two steps 16 apart at 1e17 differ by
 * one ulp; a tick step there would not advance). */
static void sane_axis(double *lo, double *hi)
{
    *lo = fmax(*lo, -DBL_MAX), *hi = fmin(*hi, DBL_MAX);
    double half = fmax(fmax(fabs(*lo), fabs(*hi)) * 0.5e-9, 1e-290);
    if (*hi / 2 - *lo / 2 >= half) return;
    double mid = *lo / 2 + *hi / 2;
    *lo = fmax(mid - half, -DBL_MAX), *hi = fmin(mid + half, DBL_MAX);
}

/* v's place on an axis from lo to hi, in [0, 1] inside it; in halves so
 * that no difference overflows. */
static double axis_frac(double v, double lo, double hi) { return (v / 2 - lo / 2) / (hi / 2 - lo / 2); }

/* y as drawn: its log on a log scale, NAN where it cannot be drawn. */
static double y_of(const hps_svg_axes *ax, double y)
{
    if (!isfinite(y)) return NAN;
    return ax->logy ? (y > 0 ? log10(y) : NAN) : y;
}

static range data_range(const hps_svg_axes *ax, const hps_svg_series *s, int n_series)
{
    range r = {HUGE_VAL, -HUGE_VAL, HUGE_VAL, -HUGE_VAL};
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            double y = y_of(ax, s[k].y[i]);
            if (!isfinite(s[k].x[i]) || !isfinite(y)) continue;
            r.x0 = fmin(r.x0, s[k].x[i]), r.x1 = fmax(r.x1, s[k].x[i]);
            r.y0 = fmin(r.y0, y), r.y1 = fmax(r.y1, y);
        }
    if (ax->xmax > ax->xmin && isfinite(ax->xmin) && isfinite(ax->xmax)) r.x0 = ax->xmin, r.x1 = ax->xmax;
    if (!isfinite(r.x0) || !isfinite(r.y0)) return r; /* nothing to draw */
    if (ax->logy) { /* whole decades */
        r.y0 = floor(r.y0), r.y1 = fmax(ceil(r.y1), r.y0 + 1);
        sane_axis(&r.x0, &r.x1);
        return r;
    }
    if (ax->ymin_zero && r.y0 > 0) r.y0 = 0;
    if (!(r.x1 > r.x0)) r.x0 -= 0.5, r.x1 += 0.5;
    if (!(r.y1 > r.y0)) r.y0 -= 0.5 * (fabs(r.y0) + 1), r.y1 += 0.5 * (fabs(r.y1) + 1);
    sane_axis(&r.y0, &r.y1);
    double pad = 0.1 * (r.y1 / 2 - r.y0 / 2);
    r.y1 += pad;
    if (!(ax->ymin_zero && r.y0 == 0)) r.y0 -= pad;
    sane_axis(&r.x0, &r.x1);
    sane_axis(&r.y0, &r.y1);
    return r;
}

static double px_of(const hps_svg_axes *ax, range r, double x) { return ax->x + axis_frac(x, r.x0, r.x1) * ax->w; }
static double py_of(const hps_svg_axes *ax, range r, double y)
{
    return ax->y + ax->h - axis_frac(y, r.y0, r.y1) * ax->h;
}

/* The ticks of [lo, hi] every st: a bounded count, and each one further on
 * (sane_axis keeps st above the values' resolution; this keeps the loop
 * finite whatever). */
#define MAX_TICKS 64
static int ticks(double lo, double hi, double st, double *v)
{
    int n = 0;
    if (!(st > 0) || !isfinite(st)) return 0;
    for (double t = ceil(lo / st) * st; n < MAX_TICKS && t <= hi + 1e-9 * st && isfinite(t); t += st) {
        if (n && !(t > v[n - 1])) break;
        v[n++] = t;
    }
    return n;
}

void hps_svg_xaxis(FILE *f, double x, double y, double w, double lo, double hi, const char *label)
{
    char lab[64];
    double v[MAX_TICKS];
    sane_axis(&lo, &hi);
    hps_svg_line(f, x, y, x + w, y, "#444444", 1, 0);
    double st = tick_step(hi / 2 - lo / 2);
    int n = ticks(lo, hi, st, v), widest = 0;
    for (int i = 0; i < n; i++) {
        tick_label(lab, sizeof lab, v[i], st);
        if ((int)strlen(lab) > widest) widest = (int)strlen(lab);
    }
    /* a label every k ticks, so that labels (about 7 px a character at 11 px) keep apart on a short axis */
    double gap = n > 1 ? (axis_frac(v[1], lo, hi) - axis_frac(v[0], lo, hi)) * w : w;
    int k = (int)ceil((7.0 * widest + 8) / fmax(gap, 1));
    for (int i = 0; i < n; i++) {
        double px = x + axis_frac(v[i], lo, hi) * w;
        hps_svg_line(f, px, y, px, y + 4, "#444444", 1, 0);
        if (i % k) continue;
        tick_label(lab, sizeof lab, v[i], st);
        hps_svg_text(f, px, y + 16, 11, "middle", "normal", "#333333", "%s", lab);
    }
    hps_svg_text(f, x + w + 20, y + 16, 11, "start", "normal", "#333333", "%s", label);
}

static void draw_axes(FILE *f, const hps_svg_axes *ax, range r)
{
    char lab[64];
    double v[MAX_TICKS];
    hps_svg_rect(f, ax->x, ax->y, ax->w, ax->h, "white", "#444444");
    double st = tick_step(r.x1 / 2 - r.x0 / 2);
    for (int i = 0, n = ticks(r.x0, r.x1, st, v); i < n; i++) {
        double px = px_of(ax, r, v[i]);
        hps_svg_line(f, px, ax->y, px, ax->y + ax->h, "#e5e5e5", 1, 0);
        tick_label(lab, sizeof lab, v[i], st);
        hps_svg_text(f, px, ax->y + ax->h + 16, 11, "middle", "normal", "#333333", "%s", lab);
    }
    /* log: a tick each decade, or each few over many decades */
    st = ax->logy ? ceil((r.y1 - r.y0) / 12) : tick_step(r.y1 / 2 - r.y0 / 2);
    for (int i = 0, n = ticks(r.y0, r.y1, st, v); i < n && isfinite(ax->logy ? pow(10, v[i]) : v[i]); i++) {
        double py = py_of(ax, r, v[i]);
        hps_svg_line(f, ax->x, py, ax->x + ax->w, py, "#e5e5e5", 1, 0);
        if (ax->logy) tick_label(lab, sizeof lab, pow(10, v[i]), pow(10, v[i] + st) - pow(10, v[i]));
        else tick_label(lab, sizeof lab, v[i], st);
        hps_svg_text(f, ax->x - 6, py + 4, 11, "end", "normal", "#333333", "%s", lab);
        for (int k = 0; ax->logy && r.y1 - r.y0 <= 2 && k < 2 && v[i] + 1 <= fmin(r.y1, 308); k++) { /* 2x, 5x */
            double m = v[i] + log10(k ? 5 : 2), pm = py_of(ax, r, m);
            hps_svg_line(f, ax->x, pm, ax->x + ax->w, pm, "#f0f0f0", 1, 0);
            tick_label(lab, sizeof lab, pow(10, m), pow(10, m));
            hps_svg_text(f, ax->x - 6, pm + 4, 10, "end", "normal", "#777777", "%s", lab);
        }
    }
    hps_svg_rect(f, ax->x, ax->y, ax->w, ax->h, "none", "#444444");
    hps_svg_text(f, ax->x + ax->w / 2, ax->y - 10, 14, "middle", "bold", "#000000", "%s", ax->title);
    hps_svg_text(f, ax->x + ax->w / 2, ax->y + ax->h + 34, 12, "middle", "normal", "#000000", "%s", ax->xlabel);
    fprintf(f, "<g transform=\"translate(%.1f,%.1f) rotate(-90)\">\n", ax->x - 52, ax->y + ax->h / 2);
    hps_svg_text(f, 0, 0, 12, "middle", "normal", "#000000", "%s", ax->ylabel);
    fputs("</g>\n", f);
}

/* A point's pixels; 0 where it cannot be drawn (not finite, not on a log
 * scale, or so far off a range given by the caller that its pixel is not). */
static int point_at(const hps_svg_axes *ax, range r, double x, double y, double *px, double *py)
{
    y = y_of(ax, y);
    if (!isfinite(x) || !isfinite(y)) return 0;
    *px = px_of(ax, r, x), *py = py_of(ax, r, y);
    return isfinite(*px) && isfinite(*py);
}

static void draw_series(FILE *f, const hps_svg_axes *ax, range r, const hps_svg_series *s)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", s->color,
            s->dashed ? " stroke-dasharray=\"6,4\"" : "");
    double prev_x = NAN, px, py;
    for (int i = 0; i < s->n; i++) {
        if (!point_at(ax, r, s->x[i], s->y[i], &px, &py)) continue;
        if (s->step && isfinite(prev_x)) fprintf(f, "%.1f,%.1f ", prev_x, py);
        fprintf(f, "%.1f,%.1f ", px, py);
        prev_x = px;
    }
    fputs("\"/>\n", f);
    for (int i = 0; s->marks && i < s->n; i++)
        if (point_at(ax, r, s->x[i], s->y[i], &px, &py))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px, py, s->color);
}

static void draw_legend(FILE *f, const hps_svg_axes *ax, const hps_svg_series *s, int n_series)
{
    double x = ax->x + 10, y = ax->y + 16;
    for (int k = 0; k < n_series; k++) {
        if (!s[k].name) continue;
        hps_svg_line(f, x, y - 4, x + 22, y - 4, s[k].color, 2.5, s[k].dashed);
        hps_svg_text(f, x + 28, y, 11, "start", "normal", "#000000", "%s", s[k].name);
        y += 16;
    }
}

void hps_svg_chart(FILE *f, const hps_svg_axes *ax, const hps_svg_series *s, int n_series)
{
    int points = 0;
    for (int k = 0; k < n_series; k++) points += s[k].n;
    range r = data_range(ax, s, n_series);
    if (!points || !isfinite(r.x0) || !isfinite(r.y0)) r = (range){0, 1, 0, 1};
    draw_axes(f, ax, r);
    if (!points)
        hps_svg_text(f, ax->x + ax->w / 2, ax->y + ax->h / 2, 14, "middle", "normal", "#888888", "no data");
    for (int k = 0; k < n_series; k++) draw_series(f, ax, r, &s[k]);
    draw_legend(f, ax, s, n_series);
}
