// The portal's only script of its own: copy buttons and confirmations.
// Pages work without it; the Content-Security-Policy allows no inline script.
"use strict";
document.addEventListener("click", function (ev) {
  const copy = ev.target.closest("[data-copy]");
  if (copy) {
    const src = document.getElementById(copy.dataset.copy);
    if (src && navigator.clipboard) {
      navigator.clipboard.writeText(src.textContent.trim()).then(function () {
        copy.textContent = "Copied";
        setTimeout(function () { copy.textContent = "Copy"; }, 1500);
      });
    }
    return;
  }
  const confirmBtn = ev.target.closest("[data-confirm]");
  if (confirmBtn && !window.confirm(confirmBtn.dataset.confirm)) {
    ev.preventDefault();
  }
});
