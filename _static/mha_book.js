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
  // The Chinese edition (<html lang="zh-CN">) gets this script's few texts in Chinese.
  var zh = /^zh/i.test(document.documentElement.lang || "");
  function size(img) { return img.naturalWidth + " \u00d7 " + img.naturalHeight + " px"; }
  if (here) {
    var vendor = new URL("vendor/", here).href;
    window.mhaLibScripts = {
      require: vendor + "requirejs/require.js",
      paths: { d3: vendor + "d3/d3.min", jquery: vendor + "jquery/jquery.min" }
    };
  }

  /* A MutationObserver callback that calls `fn` at most once a frame, and not for changes inside a live
   * view: those rewrite their status line and maps many times a second while a model downloads or runs,
   * and none of them is a widget image, a slider or an explorer frame that `fn` looks for. */
  function onPageChange(fn) {
    var queued = false;
    return function (records) {
      var outside = false;
      for (var i = 0; i < records.length && !outside; i++) {
        var node = records[i].target;
        var element = node.nodeType === 1 ? node : node.parentElement;
        outside = !(element && element.closest(".mha-live"));
      }
      if (!outside || queued) return;
      queued = true;
      requestAnimationFrame(function () { queued = false; fn(); });
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
      var label = area.querySelector(".mha-slider-name") || area.querySelector(".widget-label");  // the slider's name
      var readout = area.querySelector(".widget-readout");
      var state = ((label && label.textContent.trim()) || "value") + " " + ((readout && readout.textContent.trim()) || "");
      var alt = img.closest(".mha-attention-explorer")
        ? (zh ? "注意力图，每个头一幅热图（" + state + "）" : "Attention maps, one heatmap per head (" + state + ")")
        : (zh ? "随滑块变化的图（" + state + "）" : "Figure that follows the slider (" + state + ")");
      if (img.alt !== alt) img.alt = alt;
    }
  }
  function watch() {
    labelExplorers();
    new MutationObserver(onPageChange(labelExplorers)).observe(document.body, { subtree: true, childList: true, characterData: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();

  /* Sliders say the value the reader sees (issue 21). ipywidgets' sliders (noUiSlider) give
   * their handle no name and aria-valuetext = the option's index ("2" for the third value).
   * Each handle gets the slider's name as aria-label and the text of the readout next to it
   * as aria-valuetext: the explorer's row (.mha-slider-row, mha_lib.viz) or ipywidgets' own
   * readout (.widget-slider). Kept in step when the slider or its readout changes. */
  function announceSliderValues() {
    function sync() {
      var handles = document.querySelectorAll('.noUi-handle[role="slider"]');
      for (var i = 0; i < handles.length; i++) {
        var handle = handles[i];
        var box = handle.closest(".mha-slider-row") || handle.closest(".widget-slider");
        if (!box) continue;
        var name = box.querySelector(".mha-slider-name, .widget-label");
        var readout = box.querySelector(".widget-readout");
        var nameText = name ? name.textContent.trim() : "";
        var valueText = readout ? readout.textContent.trim() : "";  // "" while a Stack switches
        if (nameText && handle.getAttribute("aria-label") !== nameText) handle.setAttribute("aria-label", nameText);
        if (valueText && handle.getAttribute("aria-valuetext") !== valueText) handle.setAttribute("aria-valuetext", valueText);
      }
    }
    function start() {
      sync();
      new MutationObserver(onPageChange(sync)).observe(document.body, {
        subtree: true, childList: true, characterData: true,
        attributes: true, attributeFilter: ["aria-valuetext"]
      });
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }
  announceSliderValues();

  /* Big figures open at full size (issue 21). A figure image shown at under 80% of its drawn
   * width (a 72-head grid in the column, most figures on a phone) is wrapped in a link to the
   * image itself, with a line giving its size; the link opens it in a new tab, where the
   * reader can zoom. The img keeps its alt text; the link is reachable by keyboard. An image
   * held in a data: URL (mha_lib.viz's grids) links to a blob: copy, since browsers do not open
   * data: URLs in a tab. SVG diagrams (they scale) and images already inside a link are left
   * alone. The line hides when the image fits again. Widget images are not wrapped (the widget
   * owns its DOM): an attention explorer gets one such link after its output, pointing at the
   * frame shown now (the Image widget's blob: URL), updated as the slider moves. */
  function linkFullSizeFigures() {
    var SHRUNK = 0.8;
    function fullSizeUrl(img) {
      var src = img.currentSrc || img.src;
      if (src.indexOf("data:") !== 0) return src;
      var comma = src.indexOf(",");
      var meta = src.slice(5, comma);  // e.g. "image/png;base64"
      if (!/;base64$/.test(meta)) return null;
      var bytes = atob(src.slice(comma + 1));
      var buffer = new Uint8Array(bytes.length);
      for (var k = 0; k < bytes.length; k++) buffer[k] = bytes.charCodeAt(k);
      return URL.createObjectURL(new Blob([buffer], { type: meta.replace(/;base64$/, "") }));
    }
    function update(img) {
      if (!img.complete || !img.naturalWidth) return;  // its load event calls again
      var shown = img.getBoundingClientRect().width;
      var shrunk = shown > 0 && shown < SHRUNK * img.naturalWidth;
      // a <picture> (mha_lib.notebook.figure_pair) is linked whole: its <img> must stay its child
      var box = img.parentElement && img.parentElement.tagName === "PICTURE" ? img.parentElement : img;
      var link = box.parentElement && box.parentElement.classList.contains("mha-full-size") ? box.parentElement : null;
      // a figure Sphinx scaled (a width option) is already in Sphinx's link to the image file: that link is
      // the one to mark, with the same title, target and note
      var sphinx = box.parentElement && box.parentElement.matches("a.image-reference[href]") ? box.parentElement : null;
      if (!link) {
        // SVG diagrams too: on a phone their labels shrink below reading size; the tab can zoom them
        if (!shrunk || (!sphinx && img.closest("a")) || img.closest(".jupyter-widgets, .widget-image, .mha-live-view")) {
          return;
        }
        var href = sphinx ? sphinx.href : fullSizeUrl(img);
        if (!href) return;
        link = sphinx || document.createElement("a");
        link.classList.add("mha-full-size");
        link.href = href;
        link.target = "_blank";
        link.title = zh ? "在新标签页中打开原尺寸图片" : "Open the full-size image in a new tab";
        if (!sphinx) {
          box.parentNode.insertBefore(link, box);
          link.appendChild(box);
        }
        var note = document.createElement("span");
        note.className = "mha-full-size-note";
        note.textContent = zh ? "查看原尺寸（" + size(img) + "）" : "Open full size (" + size(img) + ")";
        link.appendChild(note);
      }
      link.classList.toggle("mha-full-size-shrunk", shrunk);
    }
    function updateExplorers() {
      var explorers = document.querySelectorAll(".bd-article .mha-attention-explorer");
      for (var i = 0; i < explorers.length; i++) {
        var img = explorers[i].querySelector("img");  // a Stack holds only the frame shown
        if (!img || !img.naturalWidth) continue;
        var area = explorers[i].closest(".cell_output, .output") || explorers[i].parentNode;
        var link = area.querySelector("a.mha-full-size-widget");
        var shrunk = img.getBoundingClientRect().width < SHRUNK * img.naturalWidth;
        if (!link) {
          if (!shrunk) continue;
          link = document.createElement("a");
          link.className = "mha-full-size mha-full-size-widget";
          link.target = "_blank";
          link.title = zh ? "在新标签页中按原尺寸打开当前显示的注意力图"
                          : "Open the attention maps shown now, full size, in a new tab";
          link.appendChild(document.createElement("span")).className = "mha-full-size-note";
          area.appendChild(link);
        }
        var text = zh ? "查看这些图的原尺寸（" + size(img) + "）" : "Open these maps full size (" + size(img) + ")";
        if (link.href !== img.src) link.href = img.src;
        if (link.firstChild.textContent !== text) link.firstChild.textContent = text;
        link.classList.toggle("mha-full-size-shrunk", shrunk);
      }
    }
    function start() {
      // every size change counts: loading, a window resize, an output that was hidden opening
      var resized = new ResizeObserver(function (entries) {
        for (var i = 0; i < entries.length; i++) {
          if (entries[i].target.closest(".jupyter-widgets")) updateExplorers();
          else update(entries[i].target);
        }
      });
      var images = document.querySelectorAll(".bd-article img");
      for (var i = 0; i < images.length; i++) {
        if (images[i].closest(".jupyter-widgets")) continue;
        images[i].addEventListener("load", function (e) { update(e.target); });
        resized.observe(images[i]);
        update(images[i]);
      }
      // explorer frames come and go as the slider moves: follow the page and every image load
      var explorers = document.querySelectorAll(".bd-article .mha-attention-explorer");
      if (!explorers.length && !document.querySelector(".bd-article .jupyter-widgets, script[type='application/vnd.jupyter.widget-view+json']")) return;
      new MutationObserver(onPageChange(updateExplorers)).observe(document.body, { subtree: true, childList: true });
      document.addEventListener("load", function (e) {
        if (e.target.tagName === "IMG" && e.target.closest(".mha-attention-explorer")) {
          resized.observe(e.target);
          updateExplorers();
        }
      }, true);
      updateExplorers();
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }
  linkFullSizeFigures();

  /* Display equations, tables and printed outputs wider than their box scroll inside it (mha_book.css);
   * the box then gets the class mha-scrolls, which adds a "scroll the equation" / "scroll the table" /
   * "scroll the output" label. Checked after MathJax has typeset the page, again whenever a box
   * changes width (a folded output, opened, gets its label then), and whenever fonts finish loading
   * (a font changes how wide a box's text is without changing the box). */
  function markScrollingBoxes() {
    function mark(box) {
      // measured without the label: the label changes the box's scroll width (a line that overflows
      // only into the right padding stops overflowing once the label's block comes first)
      box.classList.remove("mha-scrolls");
      box.classList.toggle("mha-scrolls", box.scrollWidth > box.clientWidth + 1);
    }
    function start() {
      var boxes = document.querySelectorAll('.bd-article mjx-container[display="true"], .bd-article table, ' +
        '.bd-article .cell_output pre');
      if (!boxes.length) return;
      var resized = new ResizeObserver(function (entries) {
        for (var i = 0; i < entries.length; i++) mark(entries[i].target);
      });
      for (var i = 0; i < boxes.length; i++) {
        resized.observe(boxes[i]);
        mark(boxes[i]);
      }
      function markAll() {
        for (var j = 0; j < boxes.length; j++) mark(boxes[j]);
      }
      if (document.fonts) {
        document.fonts.ready.then(markAll);
        document.fonts.addEventListener("loadingdone", markAll);
      }
    }
    // MathJax loads after this script: by the window's load event it exists and has started
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(start);
    else start();
  }
  if (document.readyState === "complete") markScrollingBoxes();
  else window.addEventListener("load", markScrollingBoxes);

  /* The Chinese edition: the labels and tooltips that the theme and its extensions write in English
   * whatever Sphinx's language (their catalogs have no Chinese for them), before their tooltips copy them. */
  var THEME_ZH = {
    "Toggle hidden content": "显示或隐藏内容", "Link to this heading": "链接到此标题",
    "Link to this image": "链接到此图片", "Link to this equation": "链接到此公式",
    "Toggle primary sidebar": "显示或隐藏目录侧栏", "Toggle secondary sidebar": "显示或隐藏本页目录",
    "System Settings": "跟随系统设置", "Color mode": "颜色模式", "Launch on Colab": "在 Colab 中打开",
    "Launch interactive content": "启动交互式内容", "Search this book...": "搜索本书……",
    "Page": "本页", "Main": "主导航", "Copy": "复制", "Copied!": "已复制！"
  };
  function translateThemeLabels() {
    var attributes = ["title", "aria-label", "data-bs-original-title", "placeholder"];
    var nodes = document.querySelectorAll("[title], [aria-label], [data-bs-original-title], [placeholder]");
    for (var i = 0; i < nodes.length; i++) {
      for (var a = 0; a < attributes.length; a++) {
        var value = nodes[i].getAttribute(attributes[a]);
        if (value && Object.hasOwn(THEME_ZH, value.trim())) {
          nodes[i].setAttribute(attributes[a], THEME_ZH[value.trim()]);
        }
      }
    }
  }
  if (zh) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", translateThemeLabels);
    else translateThemeLabels();
    window.addEventListener("load", translateThemeLabels);
  }

  /* Live views (issue 17). A notebook cell's mha_lib.live.live_view(...) output is an element
   * <div class="mha-live-view" data-view=... data-config=...> holding a static figure. When a
   * page has one, the ES module _static/live/mha_live.mjs (copied from mha_lib/web/ by
   * _ext/mha_book_assets.py) is imported -- its URL resolved from this script's own URL, which
   * works from every folder of the site -- and mounts each view. Pages without a live view load
   * nothing. If the import fails, the static figure stays and the view says why. */
  function mountLiveViews(scriptUrl) {
    function start() {
      var views = document.querySelectorAll(".mha-live-view");
      if (!views.length || !scriptUrl) return;
      import(new URL("live/mha_live.mjs", scriptUrl).href)
        .then(function (live) { live.mountAll(document); })
        .catch(function (err) {
          console.warn("mha_book.js: the live views could not start:", err);
          for (var i = 0; i < views.length; i++) {
            var note = document.createElement("p");
            note.className = "mha-live-status mha-live-error";
            note.textContent = zh ? "这个实时视图无法启动（" + err + "）；显示的图是预先计算好的。"
              : "This live view could not start (" + err + "); the figure shown was computed in advance.";
            views[i].appendChild(note);
          }
        });
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }
  mountLiveViews(here);
})();
