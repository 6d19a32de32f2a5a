// Runs per minute as stacked bars (one per minute, oldest left), drawn as SVG: no chart
// library for sixty rectangles.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 960;
const HEIGHT = 180;
const LEFT = 34;
const BOTTOM = 22;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) node.append(child);
  return node;
}

const time = (ms) => new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });

// `minutes`: [{start: ms, counts: {status: n}}], oldest first.
export function runsChart(minutes, statuses, now) {
  const highest = Math.max(1, ...minutes.map((m) => Object.values(m.counts).reduce((a, b) => a + (b || 0), 0)));
  const plotWidth = WIDTH - LEFT - 4;
  const plotHeight = HEIGHT - BOTTOM - 6;
  const barWidth = plotWidth / minutes.length;
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    role: "img",
    "aria-label": "runs per minute by status",
  });
  for (const value of new Set([0, Math.round(highest / 2), highest])) {
    const y = 6 + plotHeight * (1 - value / highest);
    chart.append(svg("line", { x1: LEFT, x2: WIDTH - 4, y1: y, y2: y, class: "gridline" }));
    chart.append(svg("text", { x: LEFT - 6, y: y + 4, class: "tick end" }, String(value)));
  }
  let total = 0;
  minutes.forEach((minute, index) => {
    let y = 6 + plotHeight;
    for (const status of statuses) {
      const count = minute.counts[status] || 0;
      if (!count) continue;
      total += count;
      const height = (count / highest) * plotHeight;
      y -= height;
      chart.append(
        svg(
          "rect",
          {
            x: LEFT + index * barWidth + 1,
            y,
            width: Math.max(barWidth - 2, 1),
            height,
            class: `bar bar-${status.toLowerCase()}`,
          },
          svg("title", {}, `${time(minute.start)}: ${count} ${status}`),
        ),
      );
    }
  });
  for (const index of [0, Math.floor(minutes.length / 2), minutes.length - 1]) {
    if (!minutes[index]) continue;
    chart.append(
      svg(
        "text",
        { x: LEFT + index * barWidth + barWidth / 2, y: HEIGHT - 6, class: "tick middle" },
        index === minutes.length - 1 && minutes[index].start <= now
          ? `${time(minutes[index].start)} (now)`
          : time(minutes[index].start),
      ),
    );
  }
  chart.dataset.total = String(total);
  const legend = document.createElement("div");
  legend.className = "legend";
  for (const status of statuses) {
    const item = document.createElement("span");
    item.className = `key key-${status.toLowerCase()}`;
    item.textContent = status;
    legend.append(item);
  }
  const holder = document.createElement("div");
  holder.className = "chart-holder";
  holder.append(chart, legend);
  return holder;
}
