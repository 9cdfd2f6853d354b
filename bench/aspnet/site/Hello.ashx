<%@ WebHandler Language="C#" Class="Hello" %>
using System.Web;

// The seeds' benchmark body, as application/json.
public class Hello : IHttpHandler
{
    static readonly byte[] Body = System.Text.Encoding.UTF8.GetBytes("{\"code\": 1, \"msg\": \"Hello WebAPI\"}");

    public bool IsReusable { get { return true; } }

    public void ProcessRequest(HttpContext context)
    {
        context.Response.ContentType = "application/json";
        context.Response.OutputStream.Write(Body, 0, Body.Length);
    }
}
