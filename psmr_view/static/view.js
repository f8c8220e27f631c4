// A little behaviour on top of server-rendered pages: bring the first highlighted source line into
// view, open a slice's picture centred on its symbol, and let a person copy a semantic identity by
// clicking the page's heading.
'use strict';

const inView = (element) => {
    const box = element.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= window.innerHeight;
};

// Scroll the picture's box so its anchor sits in the middle; at depth 2 (data-focus="page"), where
// the picture is what the page was opened for, also scroll the page when the anchor is outside the
// window: to the slice's heading if that shows the anchor, else to the box, which is at most 80% of
// the window high, so the anchor is then in view.
function centreOnAnchor(graph) {
    const focus = graph.querySelector('g.node.anchor');
    if (!focus) return;
    const box = graph.getBoundingClientRect();
    const at = focus.getBoundingClientRect();
    graph.scrollLeft += (at.left + at.width / 2) - (box.left + box.width / 2);
    graph.scrollTop += (at.top + at.height / 2) - (box.top + box.height / 2);
    if (graph.dataset.focus !== 'page' || inView(focus)) return;
    graph.closest('section').scrollIntoView({ block: 'start' });
    if (!inView(focus)) graph.scrollIntoView({ block: 'start' });
}

document.addEventListener('DOMContentLoaded', () => {
    const marked = document.querySelector('table.source tr.hl');
    if (marked) marked.scrollIntoView({ block: 'center' });
    const graph = document.querySelector('#slice-graph');
    if (graph) centreOnAnchor(graph);
    const heading = document.querySelector('h1.symbol');
    if (heading && navigator.clipboard) {
        heading.title = 'click to copy the semantic identity';
        heading.addEventListener('click', () => navigator.clipboard.writeText(heading.dataset.id));
    }
});
