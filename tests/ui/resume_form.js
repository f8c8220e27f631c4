// Resumes a paused flow run through the form the Prefect UI renders for it, as a person would:
// open the run's page, press Resume, fill the form Prefect generates from the RunInput model's JSON
// schema, submit, and watch the run's state badge leave Paused (or Suspended) and reach a final state.
//
// Usage: browser.js's answerSteps (tests/support/browser_session.py starts it), or `resume(page, job, done)`
// from tutorial.js; the step "resume", with keys
//   ui_url, flow_run_id, ui ("v1": the Vue UI at /, "v2": the React UI at /v2),
//   form ({decision, comment?, decided_by?, data?: the text typed into the JSON editor}),
//   refused (true: the run will refuse this answer and ask again, so do not wait for it to go on),
//   alert (the run paused on an alert, not a pen's decision: read the alert under the Decision field),
//   screenshot (where to save a PNG of the whole page as the step leaves it), form_screenshot (optional:
//   a PNG of the form as it opens).
// Answers: preselected (the Decision the form opens with), alert_text (the Decision field's description:
// the alert and what each decision does), alert_unclipped (that text wholly on screen, cut by no scroll
// box), decision_shown, fields, form_text, resume_busy (503s before the answer), resume_status, run_input,
// resume_answer, state_after?, final_state?.
//
// Every wait is on an element or a response, never a sleep: the page is a single-page app that
// renders after its API calls answer, which takes seconds on a loaded machine.
'use strict';

const { answerSteps } = require('./browser');

const FINAL = /^(Completed|Failed|Crashed|Cancelled)$/;
const WAITING = /Paused|Suspended/;
// Submits of one answer that Prefect may turn away as busy (503) before the script gives up.
const MAX_BUSY = 5;

// Labels such as `Comment (Optional)` hold regex characters: match them literally, and whole.
const exact = (text) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);

// Vue UI (v1): the run page has a Resume button; the form is a p-modal of schema-form properties.
const v1 = {
    path: (id) => `/runs/flow-run/${id}`,
    stateBadge: (page) => page.locator('.state-badge').first(),
    async openForm(page) {
        await page.getByRole('button', { name: 'Resume', exact: true }).click();
        return page.locator('.p-modal__card').filter({ hasText: 'Resume Flow Run' });
    },
    property: (form, label) => form.locator('.schema-form-property').filter({
        has: form.page().locator('.schema-form-property__label', { hasText: exact(label) }),
    }),
    labels: (form) => form.locator('.schema-form-property__label').allInnerTexts(),
    selected: async (form, label) => (await v1.property(form, label).locator('.p-select-button__control')
        .innerText()).trim(),
    async choose(form, label, value) {
        const control = this.property(form, label).locator('.p-select-button__control');
        // A click leaves this select closed in headless Chromium; ArrowDown opens it, as for a keyboard user.
        await control.press('ArrowDown');
        await form.page().locator('.p-select-option', { hasText: exact(value) }).click();
        // The control shows the choice once the form has taken it (it opens on the preselected one).
        await control.filter({ hasText: exact(value) }).waitFor();
        return (await control.innerText()).trim();
    },
    async fillText(form, label, text) {
        const property = this.property(form, label);
        await property.getByRole('button', { name: 'str', exact: true }).click();
        await property.locator('textarea').fill(text);
    },
    // A `json-string` property is a code input over a textarea.
    fillJson: (form, label, text) => v1.property(form, label).locator('textarea.p-code-input__textarea').fill(text),
    submit: (form) => form.getByRole('button', { name: 'Submit', exact: true }).click(),
};

// React UI (v2): Resume is in the run's menu; the form is a dialog whose optional properties are tabs.
const v2 = {
    path: (id) => `/v2/runs/flow-run/${id}`,
    stateBadge: (page) => page.locator('[data-slot="badge"]').filter({
        hasText: /^(Scheduled|Pending|Running|Paused|Suspended|Completed|Failed|Crashed|Cancelled|Cancelling)$/,
    }).first(),
    async openForm(page) {
        await page.getByRole('button', { name: 'Open menu', exact: true }).click();
        await page.getByRole('menuitem', { name: 'Resume', exact: true }).click();
        return page.getByRole('dialog').filter({ hasText: 'Resume Flow Run' });
    },
    property: (form, label) => form.locator('label', { hasText: exact(label) })
        .locator("xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' group ')][1]"),
    labels: (form) => form.locator('label').allInnerTexts(),
    selected: async (form, label) => (await v2.property(form, label).locator('fieldset button').first()
        .innerText()).trim(),
    async choose(form, label, value) {
        const control = this.property(form, label).locator('fieldset button').first();
        await control.click();
        await form.page().getByRole('option', { name: value, exact: true }).click();
        await control.filter({ hasText: exact(value) }).waitFor();
        return (await control.innerText()).trim();
    },
    async fillText(form, label, text) {
        const property = this.property(form, label);
        await property.getByRole('tab', { name: 'str', exact: true }).click();
        await property.getByRole('tabpanel').locator('textarea').fill(text);
    },
    // A `json-string` property is a CodeMirror editor: its content element is the textbox.
    fillJson: (form, label, text) => v2.property(form, label).locator('.cm-content[role="textbox"]').fill(text),
    submit: (form) => form.getByRole('button', { name: 'Resume', exact: true }).click(),
};

// Whether an element is wholly on screen: inside the window and inside every box around it that clips or
// scrolls (a person reads it without scrolling).
const unclipped = (locator) => locator.evaluate((element) => {
    const box = element.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) return false;
    for (let around = element.parentElement; around; around = around.parentElement) {
        if (getComputedStyle(around).overflowY === 'visible') continue;
        const frame = around.getBoundingClientRect();
        if (box.top < frame.top - 1 || box.bottom > frame.bottom + 1) return false;
    }
    return true;
});

// Fills `done` as it goes, so a failure still reports what happened before it.
async function resume(page, job, done) {
    const ui = { v1, v2 }[job.ui];
    const url = new URL(ui.path(job.flow_run_id), job.ui_url).href;
    done.page = url;
    await page.goto(url);
    // A run of a deployment waits Suspended (no process), one of `slotrelay run` Paused.
    await ui.stateBadge(page).filter({ hasText: WAITING }).waitFor();
    const form = await ui.openForm(page);
    await form.waitFor();
    done.preselected = await ui.selected(form, 'Decision');
    if (job.alert) {
        // An alert's form says why a person decides right under the Decision field (a pen's says what waits).
        const alert = form.getByText(/Why you decide:/).first();
        done.alert_text = (await alert.innerText()).trim();
        done.alert_unclipped = await unclipped(alert);
    }
    if (job.form_screenshot) await page.screenshot({ path: job.form_screenshot });
    done.decision_shown = await ui.choose(form, 'Decision', job.form.decision);
    // Read once a field could be used: the whole form is on the page.
    done.fields = (await ui.labels(form)).map((label) => label.trim());
    done.form_text = (await form.innerText()).slice(0, 3000);
    if (job.form.comment !== undefined) await ui.fillText(form, 'Comment (Optional)', job.form.comment);
    if (job.form.decided_by !== undefined) await ui.fillText(form, 'Decided By (Optional)', job.form.decided_by);
    if (job.form.data !== undefined) await ui.fillJson(form, 'Data (Optional)', job.form.data);
    // Prefect answers 503 when its SQLite database was busy and the request's transaction rolled back
    // (several runs resumed at once do it on a loaded machine): the form stays open, and a person submits
    // it again, as here. Any other status ends the loop.
    done.resume_busy = 0;
    let response;
    for (;;) {
        const answered = page.waitForResponse(
            (r) => r.request().method() === 'POST' && r.url().endsWith(`/flow_runs/${job.flow_run_id}/resume`));
        await ui.submit(form);
        response = await answered;
        if (response.status() !== 503 || done.resume_busy === MAX_BUSY) break;
        done.resume_busy += 1;
    }
    done.resume_status = response.status();
    done.run_input = response.request().postDataJSON().run_input;
    // The server's verdict: ACCEPT, or REJECT with its reason (a refused input keeps the run paused).
    const answer = await response.json();
    done.resume_answer = { status: answer.status, reason: answer.details?.reason };
    await form.waitFor({ state: 'hidden' });
    if (job.refused) return done;
    // The page follows the run by itself: it goes on (no longer Paused or Suspended), then ends.
    const badge = ui.stateBadge(page);
    await badge.filter({ hasNotText: WAITING }).waitFor();
    done.state_after = (await badge.innerText()).trim();
    await badge.filter({ hasText: FINAL }).waitFor();
    done.final_state = (await badge.innerText()).trim();
    return done;
}

// Run as a script, it decides runs; tutorial.js requires it to decide in the browser it already has.
if (require.main === module) answerSteps({ resume }, new Set(['resume']));

module.exports = { resume };
