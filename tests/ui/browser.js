// Opens Debian's headless Chromium with playwright-core, the one way the UI scripts here
// (tutorial.js, resume_form.js, psmr_view.js) start a browser; it downloads no browser of its own.
'use strict';

const readline = require('readline');

const { chromium } = require('playwright-core');

const CHROMIUM = '/usr/bin/chromium';
// `headless: true` adds --headless; the profile is the fresh --user-data-dir the caller names.
// No WebGL: with no GPU, Chromium runs it in software (SwiftShader), and the flow-run graph the Prefect
// run pages draw with it kept the GPU process busy all the time such a page was open (about a third of
// the resume form test's CPU seconds). No test here checks that picture: without WebGL v1 leaves the
// graph's pane empty and v2 draws it on a 2D canvas; everything else on the pages is the same.
const ARGS = [
    '--no-sandbox', '--disable-gpu', '--disable-webgl', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

// The Prefect UI's flow-run graph (pixi.js, on a 2D canvas without WebGL) redraws on every animation frame,
// 60 a second, as long as a run's page is open, though nothing on it moves: on a completed run's page,
// 4.5 CPU-s of the renderer and GPU processes every 15 s (measured on a 2-core machine at load 7), more
// than the page's load. The pages' animation frames come every FRAME_MS instead, as a browser saving power
// gives fewer: the graph is still drawn, at a few frames a second, and no check reads it (1.3 CPU-s the 15
// s). Timers, the API polling that moves a state badge, CSS animations and Playwright's own waits (in a
// world of their own) are untouched; the PSMR view's pages ask for no frames.
const FRAME_MS = 250;

function fewerFrames(frameMs) {
    const native = window.requestAnimationFrame.bind(window);
    const waiting = new Map();
    let last = 0;
    let timer = null;
    // Every callback asked for before the next frame runs in it, with that frame's time, as native ones do.
    const frame = () => {
        timer = null;
        const due = [...waiting.values()];
        waiting.clear();
        native((time) => due.forEach((callback) => callback(time)));
    };
    window.requestAnimationFrame = (callback) => {
        last += 1;
        waiting.set(last, callback);
        if (timer === null) timer = setTimeout(frame, frameMs);
        return last;
    };
    window.cancelAnimationFrame = (id) => { waiting.delete(id); };
}

// A persistent browser context on `profile` and its page, every wait on that page bounded by `timeoutMs`.
async function openPage(profile, timeoutMs) {
    const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 1000 },
    });
    await context.addInitScript(fewerFrames, FRAME_MS);
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(timeoutMs);
    page.setDefaultNavigationTimeout(timeoutMs);
    return { context, page };
}

// One browser for many steps (tests/support/browser_session.py starts it): the script's argument is
// {profile, timeout_ms}; then each line of stdin is a job, {step, screenshot, ...the step's keys}, run as
// `steps[job.step](page, job, done)` (which fills `done` as it goes) and answered by one line of stdout:
// {ok, step, page, text (the start of the page's text), api_errors (API calls the page saw fail during the
// step), screenshot, elapsed_ms, ...done}, or with ok: false, an error and whatever the step had done
// before it (and the exit code will be 1). After each step the page is saved to `screenshot` (the whole
// page for the steps in `fullPage`), then left blank: the caller waits on its own signals between steps,
// and an app's page left open would keep polling its server. The browser closes when stdin ends.
async function answerSteps(steps, fullPage = new Set()) {
    const browser = JSON.parse(process.argv[2]);
    const { context, page } = await openPage(browser.profile, browser.timeout_ms);
    let apiErrors = [];
    page.on('response', (r) => {
        if (r.status() >= 400 && new URL(r.url()).pathname.startsWith('/api/')) apiErrors.push(`${r.status()} ${r.url()}`);
    });
    for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
        const job = JSON.parse(line);
        const started = Date.now();
        const done = { step: job.step };
        apiErrors = [];
        try {
            await steps[job.step](page, job, done);
            done.page = page.url();
            done.text = (await page.locator('body').innerText()).slice(0, 3000);
            done.ok = true;
        } catch (error) {
            Object.assign(done, { ok: false, page: page.url(), error: String(error.message || error) });
            process.exitCode = 1;
        }
        await page.screenshot({ path: job.screenshot, fullPage: fullPage.has(job.step) });
        await page.goto('about:blank');
        console.log(JSON.stringify({
            ...done, api_errors: apiErrors, screenshot: job.screenshot, elapsed_ms: Date.now() - started,
        }));
    }
    await context.close();
}

module.exports = { openPage, answerSteps };
