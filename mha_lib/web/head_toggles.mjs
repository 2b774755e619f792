// head_toggles.mjs -- a grid of head toggles, [layer][head], the model's head_mask input: one Tab stop
// for the grid (roving tabindex), the arrow keys move, Space or Enter toggles; an "All heads on" button.
// Shared by the prune and the induction views.

import { el } from "./dom.mjs";
import { t } from "./i18n.mjs";

/** The toggles of a num_layers x H grid of heads; `onChange(mask)` gets a copy after every change by the reader. */
export class HeadToggles {
  constructor(mask, onChange) {
    this.mask = mask.map((row) => row.map((v) => (v ? 1 : 0)));
    const [NL, H] = [this.mask.length, this.mask[0].length];
    const grid = el("div", { class: "mha-live-toggles", role: "group",
      "aria-label": t("heads: {layers} layers x {heads}; pressed = on; arrow keys move between heads", { layers: NL, heads: H }) });
    grid.style.setProperty("--mha-live-heads", String(H));
    grid.style.setProperty("--mha-live-phone-columns", String(Math.min(6, H))); // a phone: rows of at most six
    grid.append(el("span", { class: "mha-live-toggles-head" })); // the header row (hidden on a phone)
    for (let h = 0; h < H; h++) grid.append(el("span", { class: "mha-live-toggles-head", "aria-hidden": "true" }, `H${h}`));
    const changed = () => {
      this.refresh();
      onChange(this.mask.map((row) => row.slice()));
    };
    this.buttons = [];
    for (let l = 0; l < NL; l++) {
      grid.append(el("span", { class: "mha-live-toggles-layer", "aria-hidden": "true" }, `L${l}`));
      const row = [];
      for (let h = 0; h < H; h++) {
        const button = el("button", { type: "button", "aria-label": t("layer {layer} head {head}", { layer: l, head: h }), title: `L${l}.H${h}`,
          tabindex: l === 0 && h === 0 ? "0" : "-1" }, String(h));
        button.addEventListener("click", () => {
          this.mask[l][h] = this.mask[l][h] ? 0 : 1;
          this.rove(l, h, false);
          changed();
        });
        button.addEventListener("keydown", (event) => {
          const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
          let to = null;
          if (event.key in moves) to = [l + moves[event.key][0], h + moves[event.key][1]];
          else if (event.key === "Home") to = [event.ctrlKey ? 0 : l, 0];
          else if (event.key === "End") to = [event.ctrlKey ? NL - 1 : l, H - 1];
          if (!to) return;
          event.preventDefault();
          this.rove(Math.min(NL - 1, Math.max(0, to[0])), Math.min(H - 1, Math.max(0, to[1])), true);
        });
        row.push(button);
        grid.append(button);
      }
      this.buttons.push(row);
    }
    const allOn = el("button", { type: "button", class: "mha-live-button" }, t("All heads on"));
    allOn.addEventListener("click", () => {
      this.mask = this.mask.map((row) => row.map(() => 1));
      changed();
    });
    this.refresh();
    this.node = el("div", {}, el("p", { class: "mha-live-note" }, t("Click a head to turn it off or on (pressed = on); " +
      "with the keyboard, Tab into the grid, move with the arrow keys and toggle with Space.")), grid, allOn);
  }

  /** Show `mask` ([layer][head] 0/1; a copy is kept), as run() sets it. */
  set(mask) {
    this.mask = mask.map((row) => row.map((v) => (v ? 1 : 0)));
    this.refresh();
  }

  /** Make toggle (l, h) the grid's one Tab stop; `focus` moves the keyboard focus there. */
  rove(l, h, focus) {
    this.buttons.flat().forEach((b) => b.setAttribute("tabindex", "-1"));
    this.buttons[l][h].setAttribute("tabindex", "0");
    if (focus) this.buttons[l][h].focus();
  }

  refresh() {
    this.buttons.forEach((row, l) => row.forEach((b, h) => b.setAttribute("aria-pressed", this.mask[l][h] ? "true" : "false")));
  }
}
