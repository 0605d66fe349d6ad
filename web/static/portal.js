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

// Uploads with a progress bar: a form marked data-upload is sent by XHR so
// that the upload's progress shows; without script it posts as a plain form.
document.addEventListener("submit", function (ev) {
  const form = ev.target;
  if (!form.matches("form[data-upload]") || !window.FormData) {
    return;
  }
  ev.preventDefault();
  const bar = form.querySelector("progress");
  const status = form.querySelector("[role=status]");
  const button = form.querySelector("button[type=submit]");
  const xhr = new XMLHttpRequest();
  xhr.open("POST", form.action);
  xhr.setRequestHeader("X-CSRF-Token", form.querySelector("input[name=csrf]").value);
  xhr.upload.addEventListener("progress", function (e) {
    if (e.lengthComputable) {
      bar.hidden = false;
      bar.value = Math.round(100 * e.loaded / e.total);
      status.textContent = e.loaded < e.total ? "Uploading… " + bar.value + "%" : "Checking and pushing the image…";
    }
  });
  xhr.addEventListener("load", function () {
    if (xhr.status < 400 && xhr.responseURL) {
      window.location.assign(xhr.responseURL);
      return;
    }
    // A refusal: show the page the server answered, which names the reason.
    document.open();
    document.write(xhr.responseText);
    document.close();
  });
  xhr.addEventListener("error", function () {
    status.textContent = "The upload failed: the connection was lost.";
    button.disabled = false;
  });
  button.disabled = true;
  status.textContent = "Uploading…";
  xhr.send(new FormData(form));
});
