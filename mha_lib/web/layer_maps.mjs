// layer_maps.mjs -- MiniLM's maps of one text, one layer or all, with the layer control: shared by the
// sentence and prune views. A head mask ([layer][head] 1 = on, 0 = off) draws the heads turned off grey.

import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { el, setText } from "./dom.mjs";

/** The layer control: a slider (aria-valuetext "layer 2 of 6") and an "all layers" switch. */
function layerControl(numLayers, start, onChange) {
  const id = `mha-live-layer-${Math.random().toString(36).slice(2)}`;
  const slider = el("input", { type: "range", id, min: "0", max: String(numLayers - 1), step: "1", value: String(start) });
  const value = el("output", { for: id });
  const all = el("input", { type: "checkbox", id: id + "-all" });
  const update = () => {
    const layer = Number(slider.value);
    const text = `layer ${layer} (${layer + 1} of ${numLayers})`;
    slider.setAttribute("aria-valuetext", text);
    setText(value, all.checked ? `layers 0–${numLayers - 1}` : text);
    slider.disabled = all.checked;
    onChange(all.checked ? "all" : layer);
  };
  slider.addEventListener("input", update);
  all.addEventListener("change", update);
  const node = el("div", { class: "mha-live-controls" },
    el("label", { for: id }, "Layer"), slider, value,
    el("span", {}, all, el("label", { for: id + "-all" }, "all layers")));
  return { node, update, slider, all, value };
}

/** Heads of the chosen layer(s), as HeadGrid entries. mask: [layer][head] 0/1 or null. */
function headsOf(attentions, which, mask) {
  const layers = which === "all" ? attentions.map((_, l) => l) : [which];
  return layers.map((l) => attentions[l].map((map, h) => ({ label: `L${l}.H${h}`, map, off: !!mask && !mask[l][h] })));
}

/** Shows MiniLM's maps of one text, one layer or all. Shared by the sentence and prune views. */
export class LayerMaps {
  constructor(view, numLayers, start) {
    this.view = view;
    this.which = start;
    this.node = el("div");
    this.grids = [];
    this.control = layerControl(numLayers, start, (which) => {
      this.which = which;
      this.draw();
    });
  }

  show(tokens, attentions, mask = null) {
    this.tokens = tokens;
    this.attentions = attentions;
    this.mask = mask;
    this.draw();
  }

  draw() {
    if (!this.attentions) return;
    const groups = headsOf(this.attentions, this.which, this.mask);
    const vmax = largestWeight(groups.flat().map((h) => h.map));
    this.view.legend.show(vmax);
    // one grid per layer shown, each under its title; grids are reused between redraws
    while (this.grids.length > groups.length) this.grids.pop().box.remove();
    groups.forEach((heads, i) => {
      if (!this.grids[i]) {
        const grid = new HeadGrid({ readout: this.view.readout, minMap: groups.length > 1 ? 72 : 110 });
        const title = el("p", { class: "mha-live-layer-title" });
        const box = el("div", {}, title, grid.node);
        this.node.append(box);
        this.grids[i] = { grid, title, box };
      }
      const { grid, title } = this.grids[i];
      grid.minMap = groups.length > 1 ? 72 : 110;
      title.hidden = groups.length === 1;
      setText(title, `layer ${heads[0].label.split(".")[0].slice(1)}`);
      grid.onEnlarge = (h) => {
        this.view.lastFocus = grid.buttons[h];
        this.view.enlarge(grid.heads[h], this.tokens, vmax, grid, h);
      };
      grid.show(heads, this.tokens, vmax);
    });
    if (!this.view.zoom.node.hidden && this.view.zoom.head) {
      const label = this.view.zoom.head.label; // keep the enlarged head, with its new weights, under its row
      const i = groups.findIndex((heads) => heads.some((h) => h.label === label));
      if (i >= 0) {
        const h = groups[i].findIndex((x) => x.label === label);
        this.grids[i].grid.placeZoom(this.view.zoom.node, h);
        this.view.zoom.open(groups[i][h], this.tokens, vmax);
      } else {
        this.view.zoom.node.hidden = true; // its layer is no longer shown
        this.view.root.insertBefore(this.view.zoom.node, this.node);
      }
    }
  }
}
