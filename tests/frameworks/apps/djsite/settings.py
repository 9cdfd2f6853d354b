"""A minimal Django project: one view, a form with CSRF, static files through WhiteNoise."""
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "ember-tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "djsite.urls"
INSTALLED_APPS = ["django.contrib.staticfiles"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [HERE / "templates"],
              "OPTIONS": {"context_processors": ["django.template.context_processors.csrf"]}}]
DATABASES = {}
STATIC_URL = "/static/"
STATICFILES_DIRS = [HERE / "static"]
STATIC_ROOT = HERE / "collected"
WHITENOISE_USE_FINDERS = True  # serve from STATICFILES_DIRS without collectstatic
WHITENOISE_AUTOREFRESH = False
USE_TZ = True
LOGGING = {"version": 1, "disable_existing_loggers": False}
