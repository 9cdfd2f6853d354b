<%@ WebHandler Language="C#" Class="Hello" %>
using System;
using System.Web;

// A JSON handler: GET Hello.ashx?name=X, or POST a form field "name".
public class Hello : IHttpHandler, System.Web.SessionState.IReadOnlySessionState
{
    public bool IsReusable { get { return true; } }

    public void ProcessRequest(HttpContext context)
    {
        string name = context.Request["name"] ?? "world";
        object visits = context.Session == null ? null : context.Session["visits"];
        context.Response.ContentType = "application/json";
        context.Response.Write("{\"hello\": \"" + HttpUtility.JavaScriptStringEncode(name) + "\", \"method\": \"" +
            context.Request.HttpMethod + "\", \"visits\": " + (visits == null ? "null" : visits.ToString()) + "}");
    }
}
