// report_browser.mjs - load an HTML report in Debian's Chromium (headless,
// through playwright-core and the DevTools protocol) and check that it
// renders with its plots and without a single console error.
//
//   node report_browser.mjs REPORT.html OUT_DIR [REPORT.json]
//
// Fails (exit 1) on: a console message of type error or warning, an
// uncaught page error, any request that is not the page itself or a data:
// URL (the page must be self-contained: no network), a failed request, a
// missing plot, a plot smaller than 300 x 150 px or with fewer than 3 drawn
// marks, a full-page screenshot smaller than 800 x 1500 px or 40 KB, a
// figure written in two cells of one row of the verdict table, a page wider
// than its window at 1280 or 800 px, a link to nothing in the page, an
// empty section, a stamp over 1200 px tall or without its closed
// <details> of every field (none twice), a banner that does not state the
// title's verdict, a failure below a check that did not fail, SKIPs of one
// reason in more than one row, a seed's table not explained. With the
// report's JSON, also: a distributional check whose evidence is not drawn
// as it should be (a bar per bin and sample, an expected marker per bin,
// the pooled tail and the folded bins marked and named, the tallest bar of
// the test's own bins at least half the plot's height, a folded bar taller
// than the rest cut with a break mark and its count written; the PIT histogram
// with a bar per bin and its KS distance D written on it).
// Writes OUT_DIR/report.png (the whole page) and OUT_DIR/plot-N.png (each
// plot). Environment: ASSAY_CHROMIUM (default /usr/bin/chromium),
// ASSAY_PLAYWRIGHT (the playwright-core module folder).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [, , htmlPath, outDir, jsonPath] = process.argv;
if (!htmlPath || !outDir) {
  console.error('usage: node report_browser.mjs REPORT.html OUT_DIR [REPORT.json]');
  process.exit(2);
}
const report = jsonPath ? JSON.parse(fs.readFileSync(jsonPath, 'utf8')) : null;
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.ASSAY_PLAYWRIGHT || 'playwright-core');
const executablePath = process.env.ASSAY_CHROMIUM || '/usr/bin/chromium';

// The plots the page must have (their aria-label), at least.
const wantedPlots = [
  'Latency CDF of the benchmark',
  'Generator lateness',
  'TTFT CDF per generator',
  'E2E latency CDF per generator',
  'Goodput against offered rate',
  'TTFT against offered rate',
];

const problems = [];
const pageUrl = pathToFileURL(path.resolve(htmlPath)).href;
fs.mkdirSync(outDir, { recursive: true });

// playwright launches Chromium with a fresh temporary --user-data-dir of
// its own; the switches below stop Chromium's background connections,
// which fail on a closed network.
const args = [
  '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];
if (process.getuid && process.getuid() === 0) {
  args.push('--no-sandbox');
}
const browser = await chromium.launch({ executablePath, headless: true, args });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') {
      problems.push(`console ${msg.type()}: ${msg.text()}`);
    }
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) =>
    problems.push(`request failed: ${req.url()} (${req.failure()?.errorText})`));
  page.on('request', (req) => {
    const url = req.url();
    if (url !== pageUrl && !url.startsWith('data:')) {
      problems.push(`the page asked for something outside itself: ${url}`);
    }
  });
  const response = await page.goto(pageUrl, { waitUntil: 'load' });
  if (!response || !response.ok()) {
    problems.push(`loading ${pageUrl} failed`);
  }
  const title = await page.title();
  if (!title.startsWith('assay ')) {
    problems.push(`unexpected title '${title}'`);
  }
  if (report && report.schema === 'assay-kill-matrix') {
    await checkKillMatrix(page, report);
  } else {
    await checkReport(page, report);
  }
} finally {
  await browser.close();
}

// The kill matrix (assay mutants --matrix --out): a column per check that
// ran, a row per planted bug, and in each row a marked cell for exactly the
// checks its JSON says caught it, marked own or other family and by how.
async function checkKillMatrix(page, m) {
  const got = await page.$$eval('#kill-matrix', (tables) => {
    const t = tables[0];
    if (!t) {
      return null;
    }
    const r = t.getBoundingClientRect();
    return {
      width: r.width,
      columns: [...t.querySelectorAll('thead th.col')].map((th) => th.textContent),
      rows: [...t.querySelectorAll('tbody tr')].map((tr) => ({
        mutant: tr.dataset.mutant,
        thin: tr.classList.contains('thin'),
        nums: [...tr.querySelectorAll('td.num')].map((td) => td.textContent),
        cells: [...tr.querySelectorAll('td.cell.k')].map((td) => ({
          check: td.dataset.check,
          own: td.classList.contains('own'),
          rule: td.classList.contains('rule'),
          died: td.classList.contains('died'),
          glyph: td.textContent,
        })),
      })),
    };
  });
  if (!got) {
    problems.push('the page has no kill matrix table');
    return;
  }
  const cols = m.checks.map((c) => c.name);
  if (JSON.stringify(got.columns) !== JSON.stringify(cols)) {
    problems.push(`columns ${got.columns.join(',')} are not the checks ${cols.join(',')}`);
  }
  if (got.rows.length !== m.rows.length) {
    problems.push(`${got.rows.length} rows drawn for ${m.rows.length} planted bugs`);
  }
  m.rows.forEach((row, i) => {
    const g = got.rows[i];
    if (!g || g.mutant !== row.mutant) {
      problems.push(`row ${i}: ${g ? g.mutant : 'missing'} where ${row.mutant} belongs`);
      return;
    }
    const want = row.in_plan ? [String(row.own), String(row.all)] : ['\u2013', '\u2013'];
    if (JSON.stringify(g.nums) !== JSON.stringify(want)) {
      problems.push(`${row.mutant}: counts ${g.nums.join('/')} for ${want.join('/')}`);
    }
    if (g.thin !== (row.in_plan && row.own < 2)) {
      problems.push(`${row.mutant}: shaded ${g.thin} with ${row.own} own-family checks`);
    }
    const byCheck = new Map(g.cells.map((c) => [c.check, c]));
    if (g.cells.length !== row.caught.length) {
      problems.push(`${row.mutant}: ${g.cells.length} marked cells for ${row.caught.length} catches`);
    }
    for (const c of row.caught) {
      const cell = byCheck.get(c.check);
      if (!cell) {
        problems.push(`${row.mutant}: ${c.check} caught it but its cell is empty`);
      } else if (cell.own !== c.own || cell.rule !== (c.by === 'rule') ||
                 cell.died !== (c.by === 'died') || cell.glyph.trim() === '') {
        problems.push(`${row.mutant}: the cell of ${c.check} is not marked ${c.own ? 'own' : 'other'}` +
                      ` by ${c.by}`);
      }
    }
  });
  const legend = await page.$('#legend');
  if (!legend) {
    problems.push('the kill matrix has no legend');
  }
  const shot = path.join(outDir, 'kill-matrix.png');
  await page.screenshot({ path: shot, fullPage: true });
  const png = fs.readFileSync(shot);
  console.log(`screenshot ${shot}: ${png.readUInt32BE(16)} x ${png.readUInt32BE(20)} px; ` +
              `${got.rows.length} rows x ${got.columns.length} checks checked against the JSON`);
  if (got.width < 300) {
    problems.push(`the kill matrix renders ${got.width} px wide`);
  }
}

async function checkReport(page, report) {
  const plots = await page.$$eval('svg.plot', (svgs) => svgs.map((s) => {
    const r = s.getBoundingClientRect();
    return {
      label: s.getAttribute('aria-label'),
      width: r.width,
      height: r.height,
      marks: s.querySelectorAll('polyline, circle, rect').length - 2,
      noData: [...s.querySelectorAll('text')].some((t) => t.textContent === 'no data'),
    };
  }));
  // A report without a benchmark (assay compare --no-bench) has none of
  // its plots, and a shorter page.
  const hasBench = !report || report.benchmark !== null;
  for (const want of hasBench ? wantedPlots : []) {
    const p = plots.find((x) => x.label && x.label.startsWith(want));
    if (!p) {
      problems.push(`plot '${want}' is missing`);
    } else if (p.width < 300 || p.height < 150) {
      problems.push(`plot '${want}' renders at ${p.width} x ${p.height} px`);
    } else if (p.marks < 3 || p.noData) {
      problems.push(`plot '${want}' has no data drawn (${p.marks} marks)`);
    }
  }
  // The verdict table: a figure (a number with a decimal point, an
  // exponent or three digits) in two of a row's cells is written twice.
  // The first cell (the check's name and engine spec) is left out.
  const repeated = await page.$$eval('#verdict table tr', (rows) => rows.flatMap((tr) => {
    const cells = [...tr.querySelectorAll('td')].slice(1).map((td) => td.textContent);
    const seen = new Map();
    const twice = [];
    cells.forEach((text, i) => {
      for (const f of new Set(text.match(/\d+\.\d+(e[-+]?\d+)?|\d+e[-+]?\d+|\d{3,}/g) || [])) {
        if (seen.has(f) && seen.get(f) !== i) {
          twice.push(`${tr.querySelector('td code')?.textContent}: ${f}`);
        }
        seen.set(f, i);
      }
    });
    return twice;
  }));
  if (repeated.length > 0) {
    problems.push(`the verdict table writes figures twice in a row: ${repeated.join('; ')}`);
  }
  // Each distributional check's evidence, drawn as its JSON says.
  let nEvidence = 0;
  for (const c of report ? report.checks : []) {
    const ev = c.evidence;
    if (!ev) {
      continue;
    }
    if (ev.bins) {
      nEvidence++;
      const samples = ev.test === 'homogeneity' ? 2 : 1;
      const got = await page.$$eval('svg.plot', (svgs, label) => {
        const s = svgs.find((x) => x.getAttribute('aria-label') === label);
        if (!s) {
          return null;
        }
        const r = s.getBoundingClientRect();
        const texts = [...s.querySelectorAll('text')].map((t) => t.textContent);
        return {
          width: r.width,
          height: r.height,
          bars: s.querySelectorAll('rect.bar').length,
          pooled: s.querySelectorAll('rect.bar.pooled').length,
          folded: s.querySelectorAll('rect.bar.folded').length,
          expected: s.querySelectorAll('circle.expected').length,
          pooledTag: texts.includes('pooled tail'),
          othersTag: texts.includes('others'),
          frame: (s.querySelector('rect.frame') || s.querySelector('rect[stroke="#888"]'))
            ?.getBoundingClientRect().height || 0,
          tallestOwn: Math.max(0, ...[...s.querySelectorAll('rect.bar')]
            .filter((b) => !b.classList.contains('folded'))
            .map((b) => b.getBoundingClientRect().height)),
          capped: s.querySelectorAll('rect.bar.folded.capped').length,
          breaks: s.querySelectorAll('path.break').length,
          cappedValues: [...s.querySelectorAll('text.capped-value')].map((t) => t.textContent),
        };
      }, `Bins of ${c.name}`);
      const nPooled = ev.bins.filter((b) => b.pooled && !b.folded).length;
      const nFolded = ev.bins.filter((b) => b.folded).length;
      if (!got) {
        problems.push(`${c.name}: no plot of its bins`);
      } else if (got.width < 300 || got.height < 150) {
        problems.push(`${c.name}: the plot of its bins renders at ${got.width} x ${got.height} px`);
      } else if (got.bars !== samples * ev.bins.length ||
                 got.expected !== samples * ev.bins.length) {
        problems.push(`${c.name}: ${got.bars} bars and ${got.expected} expected markers for ` +
                      `${ev.bins.length} bins of ${samples} sample(s)`);
      } else if (got.pooled !== samples * nPooled || (nPooled > 0) !== got.pooledTag) {
        problems.push(`${c.name}: the pooled tail is not marked (${got.pooled} bars, ` +
                      `tag ${got.pooledTag}; ${nPooled} pooled bins)`);
      } else if (got.folded !== samples * nFolded || (nFolded > 0) !== got.othersTag) {
        problems.push(`${c.name}: the folded bins are not marked (${got.folded} bars, ` +
                      `tag ${got.othersTag}; ${nFolded} folded bins)`);
      } else if (got.tallestOwn < 0.5 * got.frame) {
        // One outsized bar (the folded "others") must not set the scale.
        problems.push(`${c.name}: the tallest bar of its own bins is ${got.tallestOwn.toFixed(0)} px ` +
                      `of a ${got.frame.toFixed(0)} px plot: flattened`);
      } else {
        const own = Math.max(...ev.bins.filter((b) => !b.folded)
          .flatMap((b) => [b.observed, b.expected, b.observed_b ?? 0]));
        const outsized = ev.bins.filter((b) => b.folded &&
          Math.max(b.observed, b.expected, b.observed_b ?? 0) > 1.5 * own);
        const wantCapped = outsized.length * samples;
        if (got.capped < outsized.length || got.breaks < outsized.length) {
          problems.push(`${c.name}: ${outsized.length} folded bar(s) taller than the rest, ` +
                        `${got.capped} drawn cut with ${got.breaks} break mark(s)`);
        } else if (outsized.length > 0 &&
                   !got.cappedValues.some((v) => v.startsWith(String(outsized[0].observed)))) {
          problems.push(`${c.name}: the cut bar's count ${outsized[0].observed} is not written ` +
                        `(${got.cappedValues.join(', ')}; ${wantCapped} capped marks)`);
        }
      }
    }
    if (ev.pit) {
      nEvidence++;
      const got = await page.$$eval('svg.plot', (svgs, label) => {
        const s = svgs.find((x) => x.getAttribute('aria-label') === label);
        return s ? {
          bars: s.querySelectorAll('rect.bar.pit').length,
          texts: [...s.querySelectorAll('text')].map((t) => t.textContent),
        } : null;
      }, `PIT of ${c.name}`);
      const d = `KS distance D = ${ev.pit.ks_d.toFixed(4)}`;
      if (!got) {
        problems.push(`${c.name}: no plot of its PIT values`);
      } else if (got.bars !== ev.pit.bins.length) {
        problems.push(`${c.name}: ${got.bars} PIT bars for ${ev.pit.bins.length} bins`);
      } else if (!got.texts.includes(d)) {
        problems.push(`${c.name}: the PIT plot does not say '${d}'`);
      }
    }
  }
  const hasEvidence = report && report.checks.some((c) => c.evidence);
  if (hasEvidence && nEvidence === 0) {
    problems.push('the report has no distributional evidence to check');
  }
  await checkLayout(page, report);
  const handles = await page.$$('svg.plot');
  for (let i = 0; i < handles.length; i++) {
    await handles[i].screenshot({ path: path.join(outDir, `plot-${i + 1}.png`) });
  }
  const shot = path.join(outDir, 'report.png');
  await page.screenshot({ path: shot, fullPage: true });
  const png = fs.readFileSync(shot);
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  console.log(`screenshot ${shot}: ${width} x ${height} px, ${png.length} bytes; ` +
              `${plots.length} plots: ${plots.map((p) => `${p.label} (${p.marks} marks)`).join('; ')}; ` +
              `${nEvidence} evidence plots checked against the JSON`);
  if (width < 800 || (hasBench && (height < 1500 || png.length < 40000))) {
    problems.push(`the screenshot is too small: ${width} x ${height} px, ${png.length} bytes`);
  }
}
// The page's layout, as its JSON says it should read: no horizontal
// scroll of the page itself at 1280 and 800 px (a wide table scrolls in
// its own box, anything else wraps), every link inside the page finds its
// target, no section left empty, the stamp a short table with the rest in
// a closed <details> holding no field twice, the seed's table explained
// where it appears, the banner stating the title's verdict, and the
// verdict table's failures above its rows of SKIPs, one row per reason.
async function checkLayout(page, report) {
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 900 });
    const over = await page.evaluate(() => {
      const de = document.documentElement;
      const out = [];
      if (de.scrollWidth > de.clientWidth + 1) {
        out.push(`the page is ${de.scrollWidth} px wide in a ${de.clientWidth} px window`);
      }
      for (const t of document.querySelectorAll('table')) {
        const cs = getComputedStyle(t);
        if (t.scrollWidth > t.clientWidth + 1 && cs.overflowX !== 'auto' && cs.overflowX !== 'scroll') {
          out.push(`a table ${t.scrollWidth} px wide is clipped to ${t.clientWidth} px`);
        }
      }
      return out;
    });
    for (const o of over) {
      problems.push(`at ${width} px: ${o}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  const got = await page.evaluate(() => {
    const text = (el) => (el ? el.textContent : '');
    const stamp = document.querySelector('#stamp');
    const details = stamp ? stamp.querySelector('details') : null;
    const stampHeight = stamp ? stamp.getBoundingClientRect().height : 0;
    const pairs = details ? [...details.querySelectorAll('tr')].map((tr) => {
      const td = tr.querySelectorAll('td');
      const key = text(td[0]).split('.').pop();
      return `${key}=${text(td[1])}`;
    }) : [];
    const links = [...document.querySelectorAll('a[href^="#"]')].map((a) => a.getAttribute('href'))
      .filter((h) => !document.getElementById(h.slice(1)));
    const empty = [...document.querySelectorAll('main section')].filter((s) =>
      s.children.length <= 1 || /No benchmark in this report|Not run for this report|No check was run\./
        .test(s.textContent)).map((s) => s.id);
    const seed = document.querySelector('#seed-table p');
    const rows = [...document.querySelectorAll('table.verdicts tr')].slice(1).map((tr) => ({
      verdict: text(tr.querySelector('span.v')),
      group: tr.classList.contains('skip-group'),
    }));
    return {
      title: document.title,
      banner: text(document.querySelector('.banner')),
      stampHeight,
      detailsOpen: details ? details.open : null,
      pairs,
      links,
      empty,
      seed: seed ? seed.textContent : null,
      rows,
    };
  });
  if (got.links.length > 0) {
    problems.push(`links to nothing in the page: ${got.links.join(', ')}`);
  }
  if (got.empty.length > 0) {
    problems.push(`empty sections: ${got.empty.join(', ')}`);
  }
  if (got.detailsOpen !== false) {
    problems.push('the stamp has no closed <details> with its every field');
  } else if (got.stampHeight > 1200) {
    problems.push(`the stamp takes ${got.stampHeight.toFixed(0)} px with its details closed`);
  }
  const twice = got.pairs.filter((p, i) => got.pairs.indexOf(p) !== i);
  if (twice.length > 0) {
    problems.push(`the stamp's fields repeat: ${twice.slice(0, 5).join('; ')}`);
  }
  if (report && report.seed_table && !(got.seed || '').startsWith("The seed's table is")) {
    problems.push(`the seed's table is not explained where it appears: '${got.seed}'`);
  }
  const words = got.title.replace(/^assay [a-z]+: /, '');
  const noChecks = report && report.checks.length === 0 && !report.compare;
  if (!noChecks && !got.banner.startsWith(words)) {
    problems.push(`the banner '${got.banner}' does not state the title's verdict '${words}'`);
  }
  const firstOther = got.rows.findIndex((r) => r.verdict !== 'FAIL' && r.verdict !== 'ERROR');
  const lastFailure = got.rows.map((r) => r.verdict === 'FAIL' || r.verdict === 'ERROR').lastIndexOf(true);
  if (firstOther >= 0 && lastFailure > firstOther) {
    problems.push('a failure is listed below a check that did not fail');
  }
  if (report) {
    const reasons = new Set(report.checks.filter((c) => c.verdict === 'SKIP').map((c) => c.failure));
    const skipRows = got.rows.filter((r) => r.verdict === 'SKIP').length;
    if (skipRows !== reasons.size) {
      problems.push(`${skipRows} rows of SKIPs for ${reasons.size} reasons`);
    }
  }
  console.log(`layout: stamp ${got.stampHeight.toFixed(0)} px (${got.pairs.length} fields in its ` +
              `details); title '${got.title}'; ${got.rows.length} verdict rows`);
}

if (problems.length > 0) {
  for (const p of problems) {
    console.error(`FAIL: ${p}`);
  }
  process.exit(1);
}
console.log('the report renders in Chromium with its plots and no console error');
