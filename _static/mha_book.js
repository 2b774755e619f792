/* mha_book.js -- on every page of the book (Jupyter Book adds every .js file under _static/
 * to html_js_files), in <head>, before the page's own scripts.
 *
 * 1. window.mhaLibScripts: where the book's own copies of require.js, d3 and jquery live, so
 *    that mha_lib.viz.bertviz_view loads them from the book instead of cdnjs (see
 *    _ext/mha_book_assets.py, which copies them into _static/vendor/ from tests/browser's
 *    npm packages). Outside the book (Jupyter, Colab) bertviz_view falls back to the CDN.
 *
 * 3. Alt text for the images widgets show (ipywidgets' Image has no alt): what they are and the
 *    slider's label and value, kept up to date as the page changes.
 *
 * 2. A MathJax 2 -> 3 bridge. The ipywidgets HTML manager (html-manager 1.x) typesets widget
 *    labels with MathJax 2's API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]), while
 *    the book loads MathJax 3, which has no Hub: "Cannot read properties of undefined (reading
 *    'Queue')". Whatever object window.MathJax is (Sphinx's config object first, MathJax 3
 *    itself once loaded) gets a non-enumerable Hub whose Queue typesets with MathJax 3.
 */
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  if (here) {
    var vendor = new URL("vendor/", here).href;
    window.mhaLibScripts = {
      require: vendor + "requirejs/require.js",
      paths: { d3: vendor + "d3/d3.min", jquery: vendor + "jquery/jquery.min" }
    };
  }

  function typeset(element) {
    var mj = current;
    // Before MathJax 3 has loaded there is nothing to call; its startup typesets the page anyway.
    if (!mj || !mj.startup || !mj.startup.promise || typeof mj.typesetPromise !== "function") return;
    mj.startup.promise
      .then(function () { return mj.typesetPromise(element ? [element] : undefined); })
      .catch(function (err) { console.warn("MathJax could not typeset a widget label:", err); });
  }
  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") typeset(job[2]);
      }
    }
  };
  function adopt(value) {
    if (value && typeof value === "object" && !("Hub" in value)) {
      Object.defineProperty(value, "Hub", { value: hub, enumerable: false, configurable: true, writable: true });
    }
    return value;
  }
  var current = adopt(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = adopt(value); }
  });

  function labelExplorers() {
    // every image a widget shows: the explorer's maps, and figures that follow its slider
    var images = document.querySelectorAll(".jupyter-widgets img, .widget-image");
    for (var j = 0; j < images.length; j++) {
      var img = images[j];
      var area = img.closest(".cell_output, .output") || document;
      var label = area.querySelector(".widget-label");
      var readout = area.querySelector(".widget-readout");
      var state = ((label && label.textContent.trim()) || "value") + " " + ((readout && readout.textContent.trim()) || "");
      var alt = img.closest(".mha-attention-explorer")
        ? "Attention maps, one heatmap per head (" + state + ")"
        : "Figure that follows the slider (" + state + ")";
      if (img.alt !== alt) img.alt = alt;
    }
  }
  function watch() {
    labelExplorers();
    new MutationObserver(labelExplorers).observe(document.body, { subtree: true, childList: true, characterData: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
})();
