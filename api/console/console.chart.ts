import { html, type Html } from './html';
import type { DayUsage } from '../../platform/console/console.repository';

const W = 900;
const H = 260;
const PAD = { left: 48, right: 56, top: 16, bottom: 36 };

/** A round upper bound for an axis (1, 2 or 5 times a power of ten) at or above `max`. */
export function niceMax(max: number): number {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= max)!;
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));

/**
 * Requests (bars, left axis) and credits (line, right axis) per day as inline SVG: no script,
 * no library, readable without colour (the two series differ in shape). Each bar and point has
 * a <title> with the exact figures for a hover tooltip.
 */
export function usageChart(days: DayUsage[]): Html {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const reqMax = niceMax(Math.max(...days.map((d) => d.requests)));
  const credMax = niceMax(Math.max(...days.map((d) => d.credits)));
  const step = plotW / days.length;
  const barW = Math.max(2, step * 0.6);
  const y = (v: number, max: number) => PAD.top + plotH - (Math.max(0, v) / max) * plotH;
  const ticks = [0, 0.25, 0.5, 0.75, 1];

  const grid = ticks.map((t) => {
    const gy = PAD.top + plotH - t * plotH;
    return html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${gy}" y2="${gy}"/>
<text class="axis" x="${PAD.left - 6}" y="${gy + 4}" text-anchor="end">${fmt(t * reqMax)}</text>
<text class="axis credits" x="${W - PAD.right + 6}" y="${gy + 4}">${fmt(t * credMax)}</text>`;
  });
  const bars = days.map((d, i) => {
    const x = PAD.left + i * step + (step - barW) / 2;
    const top = y(d.requests, reqMax);
    return html`<rect class="bar" x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${barW.toFixed(1)}" height="${(PAD.top + plotH - top).toFixed(1)}"><title>${d.day}: ${d.requests} requests, ${d.credits} credits</title></rect>`;
  });
  const points = days.map(
    (d, i) => `${(PAD.left + i * step + step / 2).toFixed(1)},${y(d.credits, credMax).toFixed(1)}`,
  );
  const dots = days.map(
    (d, i) =>
      html`<circle class="dot" cx="${(PAD.left + i * step + step / 2).toFixed(1)}" cy="${y(d.credits, credMax).toFixed(1)}" r="3"><title>${d.day}: ${d.credits} credits</title></circle>`,
  );
  const labels = days.map((d, i) =>
    i % 5 === 0 || i === days.length - 1
      ? html`<text class="axis" x="${(PAD.left + i * step + step / 2).toFixed(1)}" y="${H - PAD.bottom + 16}" text-anchor="middle">${d.day.slice(5)}</text>`
      : null,
  );

  return html`<figure class="chart">
<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="Requests and credits per day, last ${days.length} days" xmlns="http://www.w3.org/2000/svg">
${grid}${bars}<polyline class="line" points="${points.join(' ')}"/>${dots}${labels}
<text class="axis" x="${PAD.left}" y="${H - 4}">UTC day</text>
</svg>
<figcaption><span class="key key-bar"></span> requests (left axis) <span class="key key-line"></span> credits net of refunds (right axis)</figcaption>
</figure>`;
}
