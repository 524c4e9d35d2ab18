// The theme, applied before the first paint (a classic script in <head>, so a dark console
// never flashes white): the stored choice (light, dark), else the system's preference,
// followed as it changes. The page's colours hang on `data-theme` alone; app.js owns the
// toggle and calls `ratchetTheme(choice)`.
(function () {
  var media = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  var choice = 'system';
  function apply() {
    var dark = choice === 'dark' || (choice === 'system' && media !== null && media.matches);
    document.documentElement.setAttribute('data-theme', dark ? 'dark' : 'light');
  }
  window.ratchetTheme = function (next) {
    choice = next;
    apply();
  };
  try {
    var stored = localStorage.getItem('ratchet.console.theme');
    if (stored === 'light' || stored === 'dark') choice = stored;
  } catch (e) {
    // Storage disabled: follow the system preference.
  }
  if (media !== null && media.addEventListener) media.addEventListener('change', apply);
  apply();
})();
