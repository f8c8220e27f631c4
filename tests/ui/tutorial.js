// The UI steps of docs/tutorial.md, as a person does them in the Prefect UI (v2, at /v2), one after another
// in one browser, each ending with a screenshot of the page as it is then.
//
// Usage: browser.js's answerSteps (tests/support/browser_session.py starts it), a job's keys:
//   ui_url, screenshot (PNG path), and
//   step: "quick-run" (the served deployment's page, deployment: its name, saved to deployment_screenshot
//                      when given; then Run > Quick run > Run: starts a flow run of it),
//         "run" (a flow run's page, flow_run_id, until its state badge reads one of `states`), or
//         "resume" (resume_form.js's decision in the run's form, with its keys; its screenshot is of the
//         whole page, as resume_form.js saves it).
// Answers: flow_run_id and busy (503s before it: quick-run), state (run), resume_form.js's fields (resume).
//
// Every wait is on an element or a response, never a sleep.
'use strict';

const { answerSteps } = require('./browser');
const { resume } = require('./resume_form');

// Presses of Run that Prefect may turn away as busy (503) before the script gives up.
const MAX_BUSY = 5;
const STATE = /^(Scheduled|Pending|Running|Paused|Suspended|Completed|Failed|Crashed|Cancelled|Cancelling)$/;

async function openDeployment(page, job) {
    // Searched by its name, as the page's search box does (it keeps the search in the address): a server
    // with more deployments than a page lists (the suite's shared server, or a user's) may not show it
    // on the first page. Typing instead races the box's debounced search, which re-renders the list.
    const list = new URL('/v2/deployments', job.ui_url);
    list.searchParams.set('flowOrDeploymentName', job.deployment);
    await page.goto(list.href);
    await page.getByRole('link', { name: job.deployment, exact: true }).first().click();
    await page.getByRole('button', { name: 'Run', exact: true }).waitFor();
}

const steps = {
    async 'quick-run'(page, job, done) {
        await openDeployment(page, job);
        // The deployment's page as `up` serves it, saved on the way to Run rather than in a visit of its own.
        if (job.deployment_screenshot) await page.screenshot({ path: job.deployment_screenshot });
        await page.getByRole('button', { name: 'Run', exact: true }).click();
        await page.getByText('Quick run', { exact: true }).click();
        const dialog = page.getByRole('dialog');
        // Prefect answers 503 when its SQLite database was busy (a loaded machine): the dialog stays open,
        // and a person presses Run again, as here (resume_form.js does the same for the form).
        let response;
        for (done.busy = 0; ; done.busy += 1) {
            const created = page.waitForResponse(
                (r) => r.request().method() === 'POST' && /\/api\/deployments\/[^/]+\/create_flow_run$/.test(r.url()));
            await dialog.getByRole('button', { name: 'Run', exact: true }).click();
            response = await created;
            if (response.status() !== 503 || done.busy === MAX_BUSY) break;
        }
        const answer = await response.json();
        if (response.status() !== 201) throw new Error(`create_flow_run answered ${response.status()}: ${JSON.stringify(answer)}`);
        done.flow_run_id = answer.id;
    },
    async run(page, job, done) {
        await page.goto(new URL(`/v2/runs/flow-run/${job.flow_run_id}`, job.ui_url).href);
        const badge = page.locator('[data-slot="badge"]').filter({ hasText: STATE }).first();
        await badge.filter({ hasText: new RegExp(`^(${job.states.join('|')})$`) }).waitFor();
        done.state = (await badge.innerText()).trim();
    },
    resume,
};

answerSteps(steps, new Set(['resume']));
