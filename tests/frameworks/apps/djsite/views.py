from django import forms
from django.http import HttpResponseRedirect, JsonResponse
from django.shortcuts import render


class NameForm(forms.Form):
    name = forms.CharField(max_length=20)


def index(request):
    return JsonResponse({"code": 1, "msg": "Hello WebAPI"})


def hello(request, name):
    return JsonResponse({"hello": name, "path": request.path, "q": request.GET.get("q"),
                         "script": request.META.get("SCRIPT_NAME", "")})


def form(request):
    if request.method == "POST":
        f = NameForm(request.POST)
        if f.is_valid():
            return HttpResponseRedirect("/hello/" + f.cleaned_data["name"])
    else:
        f = NameForm()
    return render(request, "form.html", {"form": f})


def crash(request):
    raise RuntimeError("boom")
