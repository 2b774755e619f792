// styles.mjs -- the views' stylesheet, mha_live.css, added to the page once.
//
// In the book the page links the file beside this module, and this module finishes loading only once
// the sheet is applied: the views mount styled (no layout that shifts under the reader). A kernel's
// widget loads these modules as one text from a blob: URL, which has no folder:
// mha_lib.live.widget_esm() writes the CSS into INLINE_CSS.

import { el } from "./dom.mjs";

const INLINE_CSS = null; // widget_esm() puts mha_live.css here

/**
 * Add the views' stylesheet to the page (once): a <link> to mha_live.css, or the inlined text.
 * @returns {Promise<void>} resolves when the sheet is applied (or failed to load: the views still work)
 */
export function addStyle() {
  if (document.getElementById("mha-live-style")) return Promise.resolve();
  if (INLINE_CSS !== null) {
    document.head.append(el("style", { id: "mha-live-style" }, INLINE_CSS));
    return Promise.resolve();
  }
  const link = el("link", { id: "mha-live-style", rel: "stylesheet", href: new URL("./mha_live.css", import.meta.url).href });
  const applied = new Promise((resolve) => {
    link.addEventListener("load", () => resolve());
    link.addEventListener("error", () => resolve());
  });
  document.head.append(link);
  return applied;
}

if (typeof document !== "undefined") await addStyle(); // in a page: styled before any view mounts
