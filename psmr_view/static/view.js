// A little behaviour on top of server-rendered pages: bring the first highlighted source line into
// view, and let a person copy a semantic identity by clicking the page's heading.
'use strict';

document.addEventListener('DOMContentLoaded', () => {
    const marked = document.querySelector('table.source tr.hl');
    if (marked) marked.scrollIntoView({ block: 'center' });
    const heading = document.querySelector('h1.symbol');
    if (heading && navigator.clipboard) {
        heading.title = 'click to copy the semantic identity';
        heading.addEventListener('click', () => navigator.clipboard.writeText(heading.dataset.id));
    }
});
