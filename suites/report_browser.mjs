// report_browser.mjs - load an HTML report in Debian's Chromium (headless,
// through playwright-core and the DevTools protocol) and check that it
// renders with its plots and without a single console error.
//
//   node report_browser.mjs REPORT.html OUT_DIR
//
// Fails (exit 1) on: a console message of type error or warning, an
// uncaught page error, any request that is not the page itself or a data:
// URL (the page must be self-contained: no network), a failed request, a
// missing plot, a plot smaller than 300 x 150 px or with fewer than 3 drawn
// marks, a full-page screenshot smaller than 800 x 1500 px or 40 KB.
// Writes OUT_DIR/report.png (the whole page) and OUT_DIR/plot-N.png (each
// plot). Environment: ASSAY_CHROMIUM (default /usr/bin/chromium),
// ASSAY_PLAYWRIGHT (the playwright-core module folder).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [, , htmlPath, outDir] = process.argv;
if (!htmlPath || !outDir) {
  console.error('usage: node report_browser.mjs REPORT.html OUT_DIR');
  process.exit(2);
}
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
  for (const want of wantedPlots) {
    const p = plots.find((x) => x.label && x.label.startsWith(want));
    if (!p) {
      problems.push(`plot '${want}' is missing`);
    } else if (p.width < 300 || p.height < 150) {
      problems.push(`plot '${want}' renders at ${p.width} x ${p.height} px`);
    } else if (p.marks < 3 || p.noData) {
      problems.push(`plot '${want}' has no data drawn (${p.marks} marks)`);
    }
  }
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
              `${plots.length} plots: ${plots.map((p) => `${p.label} (${p.marks} marks)`).join('; ')}`);
  if (width < 800 || height < 1500 || png.length < 40000) {
    problems.push(`the screenshot is too small: ${width} x ${height} px, ${png.length} bytes`);
  }
} finally {
  await browser.close();
}
if (problems.length > 0) {
  for (const p of problems) {
    console.error(`FAIL: ${p}`);
  }
  process.exit(1);
}
console.log('the report renders in Chromium with its plots and no console error');
