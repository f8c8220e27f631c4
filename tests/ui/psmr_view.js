// Reads a PSMR workspace through `slotrelay psmr view` as a person would, in Debian's headless
// Chromium with playwright-core: open the overview, search a symbol with the header's search box,
// open it, read its slice picture (the SVG dot laid out), follow the SVG edge from a caller to the
// evidence page, then open the impact page and the unknowns list.
//
// Usage: node psmr_view.js '<job JSON>' with keys
//   url (the view's address), query (text typed into the search box), symbol (the semantic identity
//   of the match to open), caller (the semantic identity whose edge into `symbol` to follow),
//   profile (a fresh Chromium user-data-dir), screenshot (PNG of the symbol page), failure_screenshot
//   (PNG of the page a failure left), timeout_ms (for every wait).
// Prints one JSON line: {ok, overview, search, symbol_page, evidence, impact, unknowns, elapsed_ms},
// or with ok: false, an error and whatever it had read before it (exit code 1).
//
// With `loads` (and `url` the page to load) it measures instead, for bench/psmr_view_bench.py: the page
// is loaded `loads` times after one warm-up, and each load's time from navigation start to the load
// event (Navigation Timing) is printed as {ok, load_ms: [...]}.
//
// Every wait is on an element, never a sleep.
'use strict';

const { chromium } = require('playwright-core');

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync',
];
const XLINK = 'http://www.w3.org/1999/xlink';
const short = (identity) => identity.replace(/^semantic:/, '');

// {data-count: text} of the numbers in one counts table.
const counts = (page, selector) => page.$$eval(`${selector} td.num`, (cells) =>
    Object.fromEntries(cells.map((c) => [c.dataset.count, Number(c.textContent.trim())])));

async function read(page, job, done) {
    await page.goto(job.url);
    await page.locator('#node-counts').waitFor();
    done.overview = {
        url: page.url(),
        heading: (await page.locator('h1').innerText()).trim(),
        nodes: await counts(page, '#node-counts'),
        edges: await counts(page, '#edge-counts'),
        findings: await counts(page, '#finding-counts'),
        unknowns: Number(await page.locator('#unknown-total').getAttribute('data-count')),
    };

    await page.locator('form.quick input[name="q"]').fill(job.query);
    await page.locator('form.quick input[name="q"]').press('Enter');
    await page.locator('table.matches').waitFor();
    done.search = { url: page.url(), matches: await page.$$eval('table.matches tbody tr', (rows) =>
        rows.map((r) => ({ id: r.dataset.id, kind: r.cells[1].textContent.trim(), file: r.cells[2].textContent.trim() }))) };
    await page.locator(`table.matches a.sym[data-id="${job.symbol}"]`).click();

    await page.locator('#slice-graph svg').waitFor();
    // What the picture shows: every node and edge of the SVG with the tooltip dot wrote for it.
    const svg = await page.$eval('#slice-graph svg', (root, xlink) => ({
        nodes: [...root.querySelectorAll('g.node')].map((g) => ({
            id: g.id, cls: g.getAttribute('class'), title: g.querySelector('a').getAttributeNS(xlink, 'title'),
        })),
        edges: [...root.querySelectorAll('g.edge')].map((g) => ({
            id: g.id, cls: g.getAttribute('class'), title: g.querySelector('a').getAttributeNS(xlink, 'title'),
            href: g.querySelector('a').getAttributeNS(xlink, 'href'),
        })),
    }), XLINK);
    done.symbol_page = { url: page.url(), heading: (await page.locator('h1.symbol').innerText()).trim(), svg };
    await page.screenshot({ path: job.screenshot, fullPage: true });

    const wanted = `${short(job.caller)} calls ${short(job.symbol)} (`;
    const edge = svg.edges.find((e) => e.title.startsWith(wanted));
    if (!edge) throw new Error(`no SVG edge titled ${wanted}...`);
    // The arrowhead: a filled triangle whose centre is on the edge, where a person clicks.
    await page.locator(`#slice-graph g[id="${edge.id}"] polygon`).first().click();
    await page.locator('section.evidence').first().waitFor();
    done.evidence = {
        url: page.url(),
        about: (await page.locator('#edge-about').innerText()).trim(),
        records: await page.$$eval('section.evidence', (sections) => sections.map((s) => ({
            artifact: s.dataset.artifact,
            line: Number(s.dataset.line),
            resolution: s.querySelector('[data-field="resolution"]').textContent.trim(),
            authority: s.querySelector('[data-field="authority"]').textContent.trim(),
            status: s.querySelector('[data-field="status"]').textContent.trim(),
            highlighted: [...s.querySelectorAll('tr.hl')].map((tr) => ({
                line: Number(tr.dataset.line), text: tr.querySelector('pre').textContent,
            })),
            // The highlighted line must be the one in view: its box inside the window.
            in_view: (() => {
                const box = s.querySelector('tr.hl').getBoundingClientRect();
                return box.top >= 0 && box.bottom <= window.innerHeight;
            })(),
        }))),
    };

    await page.goBack();
    await page.locator('#impact-link').click();
    await page.locator('#direct').waitFor();
    const ids = (selector) => page.$$eval(`${selector} li[data-id]`, (items) => items.map((li) => li.dataset.id));
    done.impact = {
        url: page.url(),
        direct: await ids('#direct'),
        derived: await ids('#derived'),
        runtime: (await page.locator('#runtime').innerText()).trim(),
        likely_tests: await ids('#likely-tests'),
        review_files: await page.$$eval('#review-files li', (items) => items.map((li) => li.textContent.trim())),
    };

    await page.locator('header nav a', { hasText: 'Unknowns' }).click();
    await page.locator('#unknowns-total').waitFor();
    done.unknowns = {
        url: page.url(),
        total: Number(await page.locator('#unknowns-total').getAttribute('data-count')),
        rows: await page.$$eval('table.unknowns tbody tr', (rows) => rows.map((r) => ({
            reason: r.dataset.reason, scope: r.cells[1].textContent.trim(),
        }))),
    };
    return done;
}

async function measure(page, job) {
    await page.goto(job.url);
    const times = [];
    for (let i = 0; i < job.loads; i += 1) {
        await page.goto(job.url, { waitUntil: 'load' });
        times.push(await page.evaluate(() => {
            const [nav] = performance.getEntriesByType('navigation');
            return nav.loadEventEnd - nav.startTime;
        }));
    }
    return { load_ms: times };
}

async function main() {
    const job = JSON.parse(process.argv[2]);
    const started = Date.now();
    const context = await chromium.launchPersistentContext(job.profile, {
        executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 1000 },
    });
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(job.timeout_ms);
    page.setDefaultNavigationTimeout(job.timeout_ms);
    // Pages the view refused: the first thing to read when a step did not find its element.
    const refused = [];
    page.on('response', (r) => { if (r.status() >= 400) refused.push(`${r.status()} ${r.url()}`); });
    const done = {};
    let outcome;
    try {
        outcome = { ok: true, ...await (job.loads ? measure(page, job) : read(page, job, done)) };
    } catch (error) {
        outcome = { ...done, ok: false, error: String(error.message || error), at: page.url() };
        await page.screenshot({ path: job.failure_screenshot, fullPage: true });
        process.exitCode = 1;
    }
    await context.close();
    console.log(JSON.stringify({ ...outcome, refused, elapsed_ms: Date.now() - started }));
}

main();
