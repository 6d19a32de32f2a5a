// A workflow's DAG, drawn by Cytoscape with the dagre layout (npm-installed into vendor/ by
// `make install`; nothing is fetched at runtime). Each task is a node in its state's colour;
// redrawing a run only restyles the nodes, so the graph does not jump while it refreshes.
// Without the vendored libraries the page still lists the tasks (the graph says why not).

const STATE_COLOURS = {
  PENDING: "#94a3b8",
  RUNNING: "#2563eb",
  RETRYING: "#d97706",
  SUCCEEDED: "#16a34a",
  FAILED: "#dc2626",
  CANCELLED: "#6b7280",
  UPSTREAM_FAILED: "#f97316",
  SKIPPED: "#a8a29e",
  DEFINED: "#64748b",
};

let libraries = null;
async function load() {
  if (!libraries) {
    libraries = Promise.all([
      import("../../vendor/cytoscape.esm.min.js"),
      import("../../vendor/cytoscape-dagre.esm.min.js"),
    ]).then(([cytoscape, dagre]) => {
      cytoscape.default.use(dagre.default);
      return cytoscape.default;
    });
  }
  return libraries;
}

const STYLE = [
  {
    selector: "node",
    style: {
      shape: "round-rectangle",
      width: "data(width)",
      height: 46,
      "background-color": "data(colour)",
      label: "data(text)",
      color: "#fff",
      "font-size": 13,
      "font-family": "system-ui, sans-serif",
      "font-weight": 600,
      "text-valign": "center",
      "text-halign": "center",
      "text-wrap": "wrap",
      "border-width": 0,
    },
  },
  { selector: "node:selected", style: { "border-width": 3, "border-color": "#111827" } },
  {
    selector: "edge",
    style: {
      width: 2,
      "line-color": "#9ca3af",
      "target-arrow-color": "#9ca3af",
      "target-arrow-shape": "triangle",
      "curve-style": "bezier",
    },
  },
];

export class TaskGraph {
  constructor(container, onSelect) {
    this.container = container;
    this.onSelect = onSelect;
    this.cy = null;
    this.drawn = null;
  }

  // `tasks`: the workflow's task specs; `states`: task_id → status (none: the definition).
  // The graph is drawn anew when a state changes (Cytoscape's label cache keeps a changed
  // label's old size), at the positions the first layout gave while the tasks stay the same.
  draw(tasks, states = {}) {
    // One drawing at a time: Cytoscape must not be torn down while it draws.
    this.drawing = (this.drawing || Promise.resolve()).catch(() => {}).then(() => this.redraw(tasks, states));
    return this.drawing;
  }

  async redraw(tasks, states) {
    const shape = JSON.stringify(tasks.map((t) => [t.task_id, t.depends_on || []]));
    const drawn = `${shape}|${JSON.stringify(states)}`;
    if (this.cy && this.drawn === drawn) return;
    let cytoscape;
    try {
      cytoscape = await load();
    } catch (error) {
      this.container.textContent = `The graph library is missing (run make install): ${error.message}`;
      this.container.classList.add("graph-missing");
      return;
    }
    const look = (taskId) => {
      const state = states[taskId] || (Object.keys(states).length ? "PENDING" : "DEFINED");
      return {
        colour: STATE_COLOURS[state] || "#64748b",
        text: state === "DEFINED" ? taskId : `${taskId}\n${state}`,
        state,
      };
    };
    const positions =
      this.cy && this.drawn?.startsWith(`${shape}|`)
        ? Object.fromEntries(this.cy.nodes().map((n) => [n.id(), { ...n.position() }]))
        : null;
    this.drawn = null; // until this drawing is done: a failed one is tried again on the next refresh
    this.cy?.destroy();
    this.cy = null;
    const create = (layout) =>
      cytoscape({
        container: this.container,
        elements: [
          // A node is as wide as its id or the longest state: the layout holds as states change.
          ...tasks.map((t) => ({
            data: { id: t.task_id, width: Math.max(t.task_id.length, 15) * 8 + 28, ...look(t.task_id) },
          })),
          ...tasks.flatMap((t) =>
            (t.depends_on || []).map((up) => ({ data: { id: `${up}->${t.task_id}`, source: up, target: t.task_id } })),
          ),
        ],
        layout,
        style: STYLE,
        maxZoom: 1.3,
        userZoomingEnabled: false,
        boxSelectionEnabled: false,
        autoungrabify: true,
      });
    const dagre = { name: "dagre", rankDir: "LR", nodeSep: 30, rankSep: 70, padding: 20 };
    try {
      this.cy = create(positions ? { name: "preset", positions, fit: true, padding: 20 } : dagre);
    } catch (error) {
      console.warn("the graph is laid out afresh:", error);
      this.cy = create(dagre);
    }
    this.drawn = drawn;
    this.cy.on("tap", "node", (event) => this.onSelect?.(event.target.id()));
    // What the graph shows, once it has drawn it (the browser tests read it).
    await new Promise((resolve) => {
      this.cy.one("render", resolve);
      setTimeout(resolve, 1000);
    });
    this.container.dataset.rendered = "true";
    this.container.dataset.states = JSON.stringify(
      Object.fromEntries(this.cy.nodes().map((n) => [n.id(), n.data("state")])),
    );
  }
}
