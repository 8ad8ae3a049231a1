// Checks, once the page has loaded, that every plot the page promises was drawn: a headless
// browser (scripts/check-report-page.sh) reads the outcome back, so a page that renders empty
// figures fails a test instead of passing one. The promise is
// <meta name="runfn-plots" content="loss,val,...">, and each plot is
// <figure class="plot" data-plot="NAME"><svg>...</svg><figcaption>...</figcaption></figure>.
// A missing plot is a console error "runfn: missing plot NAME (why)"; success sets
// <html data-plots-checked="COUNT">, which a page whose script never ran cannot have.
// A page with verdicts (<meta name="runfn-verdict" content="failed,...">, one status per night)
// must show each as a <section class="verdict"> whose heading starts with its status in
// capitals, visible, the first one on the first screen: a night's failure hidden by a style or
// pushed below the fold is an error too. Their headings go to <html data-verdict>.
(function () {
  "use strict";

  var DRAWN = "path, line, polyline, polygon, rect, circle, ellipse";

  function expectedNames() {
    var meta = document.querySelector('meta[name="runfn-plots"]');
    if (!meta) {
      return null;
    }
    return meta.content
      .split(",")
      .map(function (name) {
        return name.trim();
      })
      .filter(function (name) {
        return name !== "";
      });
  }

  function figureOf(name) {
    // Compared as data rather than put into a selector, so no name needs CSS escaping.
    var figures = document.querySelectorAll("figure.plot");
    for (var i = 0; i < figures.length; i++) {
      if (figures[i].dataset.plot === name) {
        return figures[i];
      }
    }
    return null;
  }

  // A rect that covers the whole plot is the background the plotting library paints first; a
  // plot with nothing else drew no data.
  function isBackground(element, svgBox) {
    if (element.tagName.toLowerCase() !== "rect") {
      return false;
    }
    var box = element.getBoundingClientRect();
    return box.width >= svgBox.width - 1 && box.height >= svgBox.height - 1;
  }

  function drawnCount(svg, svgBox) {
    var count = 0;
    var elements = svg.querySelectorAll(DRAWN);
    for (var i = 0; i < elements.length; i++) {
      var element = elements[i];
      if (isBackground(element, svgBox)) {
        continue;
      }
      var box = element.getBoundingClientRect();
      // A horizontal or vertical line has one zero side; a drawn thing has at least one non-zero.
      if (box.width > 0 || box.height > 0) {
        count++;
      }
    }
    return count;
  }

  // Why the plot `name` is not there, or null when it is.
  function problemWith(name) {
    var figure = figureOf(name);
    if (!figure) {
      return 'no <figure class="plot" data-plot="' + name + '">';
    }
    var svg = figure.querySelector("svg");
    if (!svg) {
      return "its figure has no <svg>";
    }
    var svgBox = svg.getBoundingClientRect();
    if (!(svgBox.width > 0 && svgBox.height > 0)) {
      return "its svg has no rendered size (" + svgBox.width + "x" + svgBox.height + ")";
    }
    if (drawnCount(svg, svgBox) === 0) {
      return "its svg draws nothing beyond the background";
    }
    return null;
  }

  var WORDS = { passed: "PASSED", blocked: "BLOCKED", failed: "FAILED", incomplete: "INCOMPLETE" };

  // The number of problems with the page's verdicts (each reported as a console error).
  function checkVerdicts() {
    var meta = document.querySelector('meta[name="runfn-verdict"]');
    if (!meta) {
      return 0;
    }
    var statuses = meta.content.split(",").filter(function (s) {
      return s !== "";
    });
    var banners = document.querySelectorAll("section.verdict");
    if (banners.length !== statuses.length) {
      console.error(
        "runfn: the page promises " + statuses.length + " verdict(s) and shows " + banners.length
      );
      return 1;
    }
    var problems = 0;
    var headings = [];
    for (var i = 0; i < banners.length; i++) {
      var banner = banners[i];
      var style = window.getComputedStyle(banner);
      var box = banner.getBoundingClientRect();
      var heading = banner.querySelector("h2");
      var text = heading ? heading.innerText.trim() : "";
      var word = WORDS[statuses[i]] || statuses[i].toUpperCase();
      if (!(box.width > 0 && box.height > 0) || style.visibility !== "visible" ||
          parseFloat(style.opacity) === 0) {
        console.error("runfn: verdict " + (i + 1) + " (" + statuses[i] + ") is not visible");
        problems++;
      } else if (i === 0 && box.top + window.scrollY >= window.innerHeight) {
        console.error("runfn: the verdict is below the first screen (at " + Math.round(box.top) + " px)");
        problems++;
      }
      if (text.indexOf(word) !== 0) {
        console.error('runfn: verdict ' + (i + 1) + ' should start with "' + word + '", it reads "' + text + '"');
        problems++;
      }
      headings.push(text);
    }
    document.documentElement.dataset.verdict = headings.join(" | ");
    return problems;
  }

  function check() {
    var verdictProblems = checkVerdicts();
    var names = expectedNames();
    if (names === null) {
      console.error('runfn: no <meta name="runfn-plots"> saying which plots to expect');
      return;
    }
    var missing = 0;
    names.forEach(function (name) {
      var problem = problemWith(name);
      if (problem !== null) {
        console.error("runfn: missing plot " + name + " (" + problem + ")");
        missing++;
      }
    });
    if (missing === 0 && verdictProblems === 0) {
      document.documentElement.dataset.plotsChecked = String(names.length);
    }
    // The checker sizes its full-page screenshot from this.
    document.documentElement.dataset.pageHeight = String(
      Math.ceil(document.documentElement.scrollHeight)
    );
  }

  if (document.readyState === "complete") {
    check();
  } else {
    window.addEventListener("load", check);
  }
})();
