// Reads a PSMR workspace through `slotrelay psmr view` as a person would, in Debian's headless
// Chromium with playwright-core.
//
// Usage: browser.js's answerSteps (tests/support/browser_session.py starts it; one browser for every step), a
// job's keys: screenshot (PNG of the page as the step leaves it; of the whole page for `overview`) and
// step, one of:
//   person: open the overview `url`, search `query` with the header's search box, open the match
//     `symbol` (a semantic identity), read its slice picture (the SVG dot laid out; PNG
//     `symbol_screenshot`), follow the SVG edge from `caller` to the evidence page, then open the impact
//     page and the unknowns list; then open the proposed deltas from the header, open `delta`, read its
//     recorded validation checks and its diff (PNG `delta_screenshot`); then open the diff page from the
//     header, type the revisions `rev_a` and `rev_b` into its form and press Compare (a POST from the
//     view's own page), and read the diff it is redirected to. Answers overview, search, symbol_page,
//     evidence, impact, unknowns, deltas, delta, revisions.
//   attack: play another site: open its page `attack` (holding a link to the diff page with two
//     revisions, `#open`, and a form posting them to it, `#post`), follow the link, go back, submit the
//     form. Answers followed: {status, url, forms, diff}, posted: {status, url, code}.
//   What a new user reads first on a real package, a step each, each opening its own page:
//   overview: the overview `orient` (rich's): its module map and entry points.
//   depth2: the symbol page `busy`, switched to depth 2 with the page's own form; the anchor's box
//     must be inside the window as the page opens (PNG `symbol_screenshot`, the window as it opens);
//     then the link to the list of the neighbours, drawn or not.
//   raising: the symbol page `raising` (code that raises): its picture and edge rows, and the raise
//     edge followed to its evidence.
//   source: from `raising`, its file at its line, widened with "more context" until no more is offered.
//   overload: on `overload_overview` (click's), search `overload_query`, open `overload_symbol` and
//     its impact.
//   missing: a page that does not exist (`missing`).
//   loads: for bench/psmr_view_bench.py, the page `url` loaded `loads` times after one warm-up; answers
//     each load's time from navigation start to the load event (Navigation Timing) as load_ms.
// Every answer also holds refused: the pages the view answered with a 4xx or 5xx during the step, the
// first thing to read when a step did not find its element.
//
// Every wait is on an element, never a sleep.
'use strict';

const { answerSteps } = require('./browser');

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
    await page.screenshot({ path: job.symbol_screenshot, fullPage: true });

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

    await page.locator('header nav a', { hasText: 'Deltas' }).click();
    await page.locator('table.deltas').waitFor();
    done.deltas = {
        url: page.url(),
        total: Number(await page.locator('#deltas-total').getAttribute('data-count')),
        rows: await page.$$eval('table.deltas tbody tr', (rows) => rows.map((r) => ({
            id: r.dataset.id, stale: r.dataset.stale, status: r.dataset.status, intent: r.cells[1].textContent.trim(),
            validation: r.querySelector('[data-validation]').dataset.validation,
        }))),
    };
    await page.locator(`table.deltas a.delta`, { hasText: job.delta }).click();
    await page.locator('#validation-checks').waitFor();
    // A line's colour as the reader sees it: the computed background of its row.
    const colour = (kind) => page.$eval(`table.diff tr.${kind}`, (tr) => getComputedStyle(tr).backgroundColor);
    done.delta = {
        url: page.url(),
        heading: (await page.locator('h1.delta').innerText()).trim(),
        checks: await page.$$eval('#validation-checks tbody tr', (rows) => rows.map((r) => ({
            check: r.dataset.check, ok: r.dataset.ok, result: r.cells[1].textContent.trim(),
        }))),
        edits: await page.$$eval('table.edits tbody tr', (rows) => rows.map((r) => ({
            kind: r.dataset.kind, evidence: r.dataset.evidence || null,
            symbols: [...r.querySelectorAll('a.sym')].map((a) => a.dataset.id),
        }))),
        diffs: await page.$$eval('section.file-diff', (sections) => sections.map((s) => ({
            file: s.dataset.file,
            added: [...s.querySelectorAll('tr.add pre')].map((pre) => pre.textContent),
            removed: [...s.querySelectorAll('tr.del pre')].map((pre) => pre.textContent),
        }))),
        colours: { add: await colour('add'), del: await colour('del'), ctx: await colour('ctx') },
        // What a person could act with on this page besides the header's search box.
        forms: await page.$$eval('main form', (forms) => forms.length),
        apply_links: await page.$$eval('a[href]', (links) => links.map((a) => a.href).filter((h) => /apply/i.test(h))),
    };
    await page.screenshot({ path: job.delta_screenshot, fullPage: true });

    await page.locator('header nav a', { hasText: 'Diff' }).click();
    await page.locator('form#revisions').waitFor();
    await page.locator('form#revisions input[name="rev_a"]').fill(job.rev_a);
    await page.locator('form#revisions input[name="rev_b"]').fill(job.rev_b);
    const [compared] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'POST'),
        page.locator('form#revisions button[type="submit"]').click(),
    ]);
    await page.locator('#diff-counts').waitFor();
    const listed = (section) => page.$$eval(`#${section} [data-id]`, (items) => items.map((i) => i.dataset.id));
    done.revisions = {
        method: await page.$eval('form#revisions', (form) => form.method),
        posted: compared.status(),
        url: page.url(),
        counts: await counts(page, '#diff-counts'),
        symbols_added: await listed('symbols_added'),
        symbols_changed: await listed('symbols_changed'),
    };
}

// Another site's page: follow its link to the diff page (a GET carrying two revisions), then submit
// its form posting them there. Each step's answer is the main document's response.
async function attack(page, job) {
    await page.goto(job.attack);
    const [followed] = await Promise.all([page.waitForNavigation(), page.locator('#open').click()]);
    const result = {
        followed: {
            status: followed.status(),
            url: page.url(),
            forms: await page.$$eval('form#revisions', (forms) => forms.length),
            diff: await page.$$eval('#diff-counts', (tables) => tables.length),
        },
    };
    await page.goto(job.attack);
    const [posted] = await Promise.all([page.waitForNavigation(), page.locator('#post button').click()]);
    result.posted = {
        status: posted.status(),
        url: page.url(),
        code: await page.$eval('[data-code]', (e) => e.dataset.code),
    };
    return result;
}

// Every node and edge of a slice's picture, with the tooltip dot wrote for it.
const picture = (page) => page.$eval('#slice-graph svg', (root, xlink) => ({
    nodes: [...root.querySelectorAll('g.node')].map((g) => ({
        id: g.id, cls: g.getAttribute('class'), title: g.querySelector('a').getAttributeNS(xlink, 'title'),
    })),
    edges: [...root.querySelectorAll('g.edge')].map((g) => ({
        id: g.id, cls: g.getAttribute('class'), title: g.querySelector('a').getAttributeNS(xlink, 'title'),
    })),
}), XLINK);

const edgeRows = (page) => page.$$eval('table.edges tbody tr', (rows) => rows.map((r) => ({
    source: r.dataset.source, relation: r.dataset.relation, target: r.dataset.target, stored: r.dataset.stored || null,
})));

const navigation = (page) => page.$$eval('header nav a', (links) => links.map((a) => a.textContent.trim()));

const REAL = {
    async overview(page, job) {
        await page.goto(job.orient);
        await page.locator('#module-map-graph svg').waitFor();
        const seen = {
            url: page.url(),
            heading: (await page.locator('h1').innerText()).trim(),
            modules: await page.$$eval('#module-map-graph g.node', (nodes, xlink) => nodes.map(
                (g) => g.querySelector('a').getAttributeNS(xlink, 'title')), XLINK),
            packages: await page.$$eval('#module-map-graph g.cluster > text', (texts) => texts.map((t) => t.textContent)),
            imports: await page.$$eval('#module-map-graph g.edge', (edges) => edges.length),
            left_out: await page.$$eval('#modules-left-out a.sym', (links) => links.map((a) => a.dataset.id)),
            // The map as drawn, and the page it is on: nothing of it is cut off.
            map_box: await page.$eval('#module-map-graph svg', (svg) => {
                const box = svg.getBoundingClientRect();
                return { left: box.left, right: box.right, width: box.width };
            }),
            page_width: await page.evaluate(() => document.documentElement.clientWidth),
            main_modules: await page.$$eval('#main-modules li', (items) => items.map((li) => li.textContent.trim())),
            main_blocks: await page.$$eval('#entry-points a.where[data-id]', (links) => links.map((a) => a.dataset.id)),
            public_api: await page.$$eval('.public-api', (blocks) => blocks.map((b) => ({
                package: b.dataset.package,
                names: [...b.querySelectorAll('.inline-list a.sym')].map((a) => a.textContent),
            }))),
            busiest: await page.$$eval('#busiest tbody tr', (rows) => rows.map((r) => ({
                id: r.dataset.id, callers: Number(r.cells[0].textContent),
            }))),
            read_first: await page.$$eval('#read-first tbody tr', (rows) => rows.map((r) => r.dataset.kind)),
            // Where each part starts: what leads the page.
            tops: await page.evaluate(() => Object.fromEntries(['module-map', 'entry-points', 'busiest', 'read-first', 'numbers'].map(
                (id) => [id, document.getElementById(id).getBoundingClientRect().top]))),
        };
        return seen;
    },

    async depth2(page, job) {
        await page.goto(job.busy);
        await page.locator('#slice-graph svg').waitFor();
        await page.locator('form.relations input[name="depth"][value="2"]').check();
        await Promise.all([page.waitForNavigation(), page.locator('form.relations button[type="submit"]').click()]);
        await page.locator('#slice-graph svg g.node.anchor').waitFor();
        // As the page opens: the anchor's box where the window shows it (the page's script ran before load).
        const seen = {
            url: page.url(),
            anchor: await page.$eval('#slice-graph g.node.anchor', (g) => {
                const box = g.getBoundingClientRect();
                return {
                    top: box.top, bottom: box.bottom, left: box.left, right: box.right,
                    window: { width: window.innerWidth, height: window.innerHeight },
                };
            }),
            note: await page.$eval('#picture-note', (p) => ({
                drawn: Number(p.dataset.drawn), left_out: Number(p.dataset.leftOut), text: p.textContent.trim(),
            })),
            svg: await picture(page),
        };
        await page.screenshot({ path: job.symbol_screenshot });
        await page.locator('#left-out-link').click();
        await page.locator('#neighbours').waitFor();
        seen.list = {
            url: page.url(),
            total: Number(await page.locator('#neighbours-total').getAttribute('data-count')),
            ids: await page.$$eval('#neighbours tbody tr', (rows) => rows.map((r) => r.dataset.id)),
            next: await page.$$eval('nav.pager a[rel="next"]', (links) => links.length),
        };
        return seen;
    },

    async raising(page, job) {
        await page.goto(job.raising);
        await page.locator('#slice-graph svg').waitFor();
        const seen = { url: page.url(), svg: await picture(page), rows: await edgeRows(page) };
        const raised = seen.svg.edges.find((e) => e.cls.includes('rel-raises'));
        if (!raised) throw new Error('no edge drawn as raises');
        await page.locator(`#slice-graph g[id="${raised.id}"] polygon`).first().click();
        await page.locator('section.evidence').first().waitFor();
        seen.evidence = {
            about: (await page.locator('#edge-about').innerText()).trim(),
            records: await page.$$eval('section.evidence h2', (hs) => hs.map((h) => h.textContent.trim())),
        };
        return seen;
    },

    async source(page, job) {
        await page.goto(job.raising);
        await page.locator('p.kind a.where').click();
        await page.locator('table.source tr.hl').waitFor();
        const shown = () => page.evaluate(() => {
            const hl = document.querySelector('table.source tr.hl');
            const box = hl.getBoundingClientRect();
            return {
                context: Number(document.querySelector('#context').dataset.context),
                rows: document.querySelectorAll('table.source tbody tr').length,
                line: Number(hl.dataset.line),
                in_view: box.top >= 0 && box.bottom <= window.innerHeight,
            };
        });
        const seen = { url: page.url(), steps: [await shown()], nav: await navigation(page) };
        for (let step = 0; step < 10 && await page.locator('#more-context').count(); step += 1) {
            await Promise.all([page.waitForNavigation(), page.locator('#more-context').click()]);
            await page.locator('table.source tr.hl').waitFor();
            seen.steps.push(await shown());
        }
        return seen;
    },

    async overload(page, job) {
        await page.goto(job.overload_overview);
        await page.locator('form.quick input[name="q"]').fill(job.overload_query);
        await page.locator('form.quick input[name="q"]').press('Enter');
        await page.locator('table.matches').waitFor();
        await page.locator(`table.matches a.sym[data-id="${job.overload_symbol}"]`).click();
        await page.locator('h1.symbol').waitFor();
        const seen = {
            url: page.url(),
            where: (await page.locator('p.kind a.where').innerText()).trim(),
            signature: (await page.locator('#signature').innerText()).trim(),
            stubs: await page.$$eval('#overloads', (found) => (found.length ? Number(found[0].dataset.count) : null)),
            conflicts: await page.$$eval('section.touching table.conflicts tbody tr', (rows) => rows.length),
        };
        await page.locator('#impact-link').click();
        await page.locator('#direct').waitFor();
        seen.impact = page.url();
        return seen;
    },

    async missing(page, job) {
        const answer = await page.goto(job.missing);
        return {
            status: answer.status(),
            code: await page.$eval('[data-code]', (e) => e.dataset.code),
            nav: await navigation(page),
            search_box: await page.$$eval('header form.quick input', (inputs) => inputs.length),
        };
    },
};

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

// A step as answerSteps runs it: `read(page, job, done)` fills `done` or returns what it read, and the
// pages refused during it are noted in done.refused as they come, a failed step's included.
const noting = (read) => async (page, job, done) => {
    done.refused = [];
    const refused = (r) => { if (r.status() >= 400) done.refused.push(`${r.status()} ${r.url()}`); };
    page.on('response', refused);
    try {
        Object.assign(done, await read(page, job, done));
    } finally {
        page.off('response', refused);
    }
};

const steps = Object.fromEntries(Object.entries({ person: read, attack, loads: measure, ...REAL })
    .map(([name, step]) => [name, noting(step)]));

answerSteps(steps, new Set(['overview']));
