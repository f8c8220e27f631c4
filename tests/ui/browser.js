// Opens Debian's headless Chromium with playwright-core, the one way the UI scripts here
// (resume_form.js, psmr_view.js) start a browser; it downloads no browser of its own.
'use strict';

const { chromium } = require('playwright-core');

const CHROMIUM = '/usr/bin/chromium';
// `headless: true` adds --headless; the profile is the fresh --user-data-dir the caller names.
const ARGS = [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync',
];

// A persistent browser context on `profile` and its page, every wait on that page bounded by `timeoutMs`.
async function openPage(profile, timeoutMs) {
    const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 1000 },
    });
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(timeoutMs);
    page.setDefaultNavigationTimeout(timeoutMs);
    return { context, page };
}

module.exports = { openPage };
