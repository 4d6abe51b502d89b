// Markdown for model text, built as DOM nodes: nothing in the text is ever
// parsed as HTML, so markup in a reply shows as text and never runs.

export function renderMarkdown(element, text) {
  element.replaceChildren();
  const parts = text.split(/^```/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const newline = part.indexOf("\n");
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      const language = newline > 0 ? part.slice(0, newline).trim() : "";
      if (language) code.dataset.language = language;
      code.textContent = newline >= 0 ? part.slice(newline + 1).replace(/\n$/, "") : part;
      pre.append(code);
      const copy = document.createElement("button");
      copy.type = "button";
      copy.textContent = "Copy";
      copy.dataset.testid = "copy-code";
      copy.addEventListener("click", () => navigator.clipboard?.writeText(code.textContent));
      pre.append(copy);
      element.append(pre);
      return;
    }
    for (const paragraph of part.split(/\n{2,}/)) {
      if (!paragraph.trim()) continue;
      const p = document.createElement("p");
      inline(p, paragraph);
      element.append(p);
    }
  });
}

function inline(parent, text) {
  const pattern = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    parent.append(document.createTextNode(text.slice(last, match.index)));
    const token = match[0];
    const node = document.createElement(token.startsWith("`") ? "code" : token.startsWith("**") ? "strong" : "em");
    node.textContent = token.startsWith("**") ? token.slice(2, -2) : token.slice(1, -1);
    parent.append(node);
    last = match.index + token.length;
  }
  parent.append(document.createTextNode(text.slice(last)));
}

